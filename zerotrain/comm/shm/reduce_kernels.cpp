// Highway's foreach_target re-includes this file once per SIMD target (HWY_TARGET_INCLUDE).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "zerotrain/comm/shm/reduce_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "zerotrain/comm/shm/reduce_kernels.h"

// Scalar helpers, defined once although the file is compiled once per target.
#ifndef ZEROTRAIN_SHM_REDUCE_SCALAR_DEFINED
#define ZEROTRAIN_SHM_REDUCE_SCALAR_DEFINED
namespace zerotrain::comm::shm::scalar {

inline uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The fold step of kMax on floats: NaN wins (the first one), then the larger, then the earlier.
template <class T>
inline T max_step(T acc, T x) {
  if (std::isnan(acc)) return acc;
  return std::isnan(x) || x > acc ? x : acc;
}

}  // namespace zerotrain::comm::shm::scalar
#endif

HWY_BEFORE_NAMESPACE();
namespace zerotrain::comm::shm::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How one storage type is read into, and written from, its accumulation vector.
template <class Storage>
struct PlainIo {
  using T = Storage;
  using D = hn::ScalableTag<T>;
  static hn::Vec<D> Load(D d, const T* p) { return hn::LoadU(d, p); }
  static void Store(D d, hn::Vec<D> v, T* p) { hn::StoreU(v, d, p); }
};

// bfloat16 is the high half of a float32: widening is a shift, and rounding back is integer
// arithmetic (nearest-even; every NaN becomes 0x7FC0, as c10 writes it).
struct BFloat16Io {
  using T = uint16_t;
  using D = hn::ScalableTag<float>;
  static hn::Vec<D> Load(D d, const T* p) {
    const hn::RebindToUnsigned<D> du32;
    const hn::Rebind<uint16_t, D> du16;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
  }
  static void Store(D d, hn::Vec<D> v, T* p) {
    const hn::RebindToUnsigned<D> du32;
    const hn::RebindToSigned<D> di32;
    const hn::Rebind<uint16_t, D> du16;
    const auto bits = hn::BitCast(du32, v);
    const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1u));
    auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du32, 0x7FFFu), odd)));
    rounded = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), hn::Set(du32, 0x7FC0u), rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, rounded)), du16, p);
  }
};

#undef ZEROTRAIN_SHM_VECTOR_HALF
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define ZEROTRAIN_SHM_VECTOR_HALF 1
// float16 through F16C (exact widening; narrowing rounds to nearest-even). A NaN is first
// replaced by the float NaN whose conversion is c10's (0x7E00 with the sign).
struct HalfIo {
  using T = uint16_t;
  using D = hn::ScalableTag<float>;
  static hn::Vec<D> Load(D d, const T* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static void Store(D d, hn::Vec<D> v, T* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    const hn::RebindToUnsigned<D> du32;
    const auto sign = hn::And(hn::BitCast(du32, v), hn::Set(du32, 0x80000000u));
    const auto quiet = hn::BitCast(d, hn::Or(sign, hn::Set(du32, 0x7FC00000u)));
    v = hn::IfThenElse(hn::IsNaN(v), quiet, v);
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
  }
};
#else
#define ZEROTRAIN_SHM_VECTOR_HALF 0
#endif

struct SumStep {
  template <class V>
  static V Apply(V acc, V x) { return hn::Add(acc, x); }
};
struct IntMaxStep {
  template <class V>
  static V Apply(V acc, V x) { return hn::Max(acc, x); }
};
struct FloatMaxStep {   // scalar::max_step, lane by lane
  template <class V>
  static V Apply(V acc, V x) {
    const auto take = hn::AndNot(hn::IsNaN(acc), hn::Or(x > acc, hn::IsNaN(x)));
    return hn::IfThenElse(take, x, acc);
  }
};

// One vector of results at element i; `divide` is the kAvg of floating types.
template <class Io, class Step, bool kDivide>
HWY_INLINE void FoldVector(typename Io::D d, typename Io::T* out, typename Io::T* also_out,
                           const typename Io::T* const* srcs, int n, int64_t i, hn::Vec<typename Io::D> divisor) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto a0 = Io::Load(d, srcs[0] + i);
  auto a1 = Io::Load(d, srcs[0] + i + lanes);
  for (int k = 1; k < n; ++k) {
    a0 = Step::Apply(a0, Io::Load(d, srcs[k] + i));
    a1 = Step::Apply(a1, Io::Load(d, srcs[k] + i + lanes));
  }
  if constexpr (kDivide) {
    a0 = hn::Div(a0, divisor);
    a1 = hn::Div(a1, divisor);
  }
  Io::Store(d, a0, out + i);
  Io::Store(d, a1, out + i + lanes);
  if (also_out != nullptr) {
    Io::Store(d, a0, also_out + i);
    Io::Store(d, a1, also_out + i + lanes);
  }
}

template <class Io, class Step, bool kDivide>
void Fold(typename Io::T* out, typename Io::T* also_out, const typename Io::T* const* srcs, int n, int64_t numel) {
  using T = typename Io::T;
  const typename Io::D d;
  const int64_t step = 2 * static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<typename Io::D> divisor = hn::Zero(d);
  if constexpr (kDivide) divisor = hn::Set(d, static_cast<hn::TFromD<typename Io::D>>(n));
  int64_t i = 0;
  for (; i + step <= numel; i += step) FoldVector<Io, Step, kDivide>(d, out, also_out, srcs, n, i, divisor);
  if (i == numel) return;
  // The tail: the same vector code on copies, so its bits are the body's.
  const int64_t rest = numel - i;
  HWY_ALIGN T tail[kMaxReduceSources][2 * HWY_MAX_BYTES / sizeof(T)];
  HWY_ALIGN T tail_out[2 * HWY_MAX_BYTES / sizeof(T)];
  const T* tail_srcs[kMaxReduceSources] = {};
  for (int k = 0; k < n; ++k) {
    std::memset(tail[k], 0, sizeof tail[k]);
    std::memcpy(tail[k], srcs[k] + i, static_cast<size_t>(rest) * sizeof(T));
    tail_srcs[k] = tail[k];
  }
  FoldVector<Io, Step, kDivide>(d, tail_out, nullptr, tail_srcs, n, 0, divisor);
  std::memcpy(out + i, tail_out, static_cast<size_t>(rest) * sizeof(T));
  if (also_out != nullptr) std::memcpy(also_out + i, tail_out, static_cast<size_t>(rest) * sizeof(T));
}

template <class Io, class MaxStep>
void FoldOp(Op op, void* out, void* also_out, const void* const* srcs, int n, int64_t numel) {
  using T = typename Io::T;
  auto* o = static_cast<T*>(out);
  auto* o2 = static_cast<T*>(also_out);
  const auto* const* s = reinterpret_cast<const T* const*>(srcs);
  constexpr bool kFloating = std::is_floating_point_v<hn::TFromD<typename Io::D>>;
  switch (op) {
    case Op::kSum: return Fold<Io, SumStep, false>(o, o2, s, n, numel);
    case Op::kMax: return Fold<Io, MaxStep, false>(o, o2, s, n, numel);
    case Op::kAvg:
      if constexpr (kFloating) {
        return Fold<Io, SumStep, true>(o, o2, s, n, numel);
      } else {
        // No integer division in SIMD: the wrapped sum, then a truncating division.
        Fold<Io, SumStep, false>(o, nullptr, s, n, numel);
        for (int64_t i = 0; i < numel; ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(n));
        if (o2 != nullptr) std::memcpy(o2, o, static_cast<size_t>(numel) * sizeof(T));
        return;
      }
  }
}

#if !ZEROTRAIN_SHM_VECTOR_HALF
void FoldHalfScalar(Op op, void* out, void* also_out, const void* const* srcs, int n, int64_t numel) {
  auto* o = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < numel; ++i) {
    float acc = half_to_float(static_cast<const uint16_t*>(srcs[0])[i]);
    for (int k = 1; k < n; ++k) {
      const float x = half_to_float(static_cast<const uint16_t*>(srcs[k])[i]);
      acc = op == Op::kMax ? scalar::max_step(acc, x) : acc + x;
    }
    if (op == Op::kAvg) acc = acc / static_cast<float>(n);
    o[i] = float_to_half(acc);
    if (also_out != nullptr) static_cast<uint16_t*>(also_out)[i] = o[i];
  }
}
#endif

// Four vectors per step, unaligned loads and stores; the last bytes through memcpy (small: no
// `rep movsb`).
void CopyImpl(void* dst, const void* src, int64_t nbytes) {
  const hn::ScalableTag<uint8_t> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  int64_t i = 0;
  for (; i + 4 * lanes <= nbytes; i += 4 * lanes) {
    const auto v0 = hn::LoadU(d, from + i);
    const auto v1 = hn::LoadU(d, from + i + lanes);
    const auto v2 = hn::LoadU(d, from + i + 2 * lanes);
    const auto v3 = hn::LoadU(d, from + i + 3 * lanes);
    hn::StoreU(v0, d, to + i);
    hn::StoreU(v1, d, to + i + lanes);
    hn::StoreU(v2, d, to + i + 2 * lanes);
    hn::StoreU(v3, d, to + i + 3 * lanes);
  }
  if (i < nbytes) std::memcpy(to + i, from + i, static_cast<size_t>(nbytes - i));
}

void ReduceImpl(Dtype dtype, Op op, void* out, void* also_out, const void* const* srcs, int n, int64_t numel) {
  switch (dtype) {
    case Dtype::kFloat32: return FoldOp<PlainIo<float>, FloatMaxStep>(op, out, also_out, srcs, n, numel);
    case Dtype::kFloat64: return FoldOp<PlainIo<double>, FloatMaxStep>(op, out, also_out, srcs, n, numel);
#if ZEROTRAIN_SHM_VECTOR_HALF
    case Dtype::kFloat16: return FoldOp<HalfIo, FloatMaxStep>(op, out, also_out, srcs, n, numel);
#else
    case Dtype::kFloat16: return FoldHalfScalar(op, out, also_out, srcs, n, numel);
#endif
    case Dtype::kBFloat16: return FoldOp<BFloat16Io, FloatMaxStep>(op, out, also_out, srcs, n, numel);
    case Dtype::kInt32: return FoldOp<PlainIo<int32_t>, IntMaxStep>(op, out, also_out, srcs, n, numel);
    case Dtype::kInt64: return FoldOp<PlainIo<int64_t>, IntMaxStep>(op, out, also_out, srcs, n, numel);
    case Dtype::kUInt8: return FoldOp<PlainIo<uint8_t>, IntMaxStep>(op, out, also_out, srcs, n, numel);
    case Dtype::kInt8: return FoldOp<PlainIo<int8_t>, IntMaxStep>(op, out, also_out, srcs, n, numel);
  }
}

}  // namespace zerotrain::comm::shm::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "zerotrain/core/error.h"

namespace zerotrain::comm::shm {

HWY_EXPORT(ReduceImpl);
HWY_EXPORT(CopyImpl);

void copy_bytes(void* dst, const void* src, int64_t nbytes) {
  if (nbytes <= 0) return;
  HWY_DYNAMIC_DISPATCH(CopyImpl)(dst, src, nbytes);
}

void reduce(Dtype dtype, Op op, void* out, const void* const* srcs, int n, int64_t numel, void* also_out) {
  ZT_INTERNAL_ASSERT(n >= 1 && n <= kMaxReduceSources, "reduce over ", n, " sources");
  if (numel <= 0) return;
  HWY_DYNAMIC_DISPATCH(ReduceImpl)(dtype, op, out, also_out, srcs, n, numel);
}

std::string reduce_target() {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

std::vector<int64_t> reduce_available_targets() {
  hwy::SetSupportedTargetsForTest(0);
  return hwy::SupportedAndGeneratedTargets();
}

std::string reduce_target_name(int64_t target) { return hwy::TargetName(target); }

void reduce_force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return scalar::float_of(sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
  if (exponent != 0) return scalar::float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

uint16_t float_to_half(float value) {
  const uint32_t bits = scalar::bits_of(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;          // NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;         // rounds to infinity (>= 65520)
  if (magnitude < 0x38800000u) {                               // below 2^-14: subnormal half
    // |value| * 2^24 is exact; rounding it to an integer (nearest-even) gives the mantissa.
    const float scaled = scalar::float_of(magnitude) * 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  return sign | static_cast<uint16_t>((magnitude - (112u << 23) + 0xFFFu + odd) >> 13);
}

float bfloat16_to_float(uint16_t bits) { return scalar::float_of(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bfloat16(float value) {
  if (std::isnan(value)) return 0x7FC0u;
  const uint32_t bits = scalar::bits_of(value);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

int64_t dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat64: case Dtype::kInt64: return 8;
    case Dtype::kFloat32: case Dtype::kInt32: return 4;
    case Dtype::kFloat16: case Dtype::kBFloat16: return 2;
    case Dtype::kUInt8: case Dtype::kInt8: return 1;
  }
  return 1;
}

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32: return "float32";
    case Dtype::kFloat64: return "float64";
    case Dtype::kFloat16: return "float16";
    case Dtype::kBFloat16: return "bfloat16";
    case Dtype::kInt32: return "int32";
    case Dtype::kInt64: return "int64";
    case Dtype::kUInt8: return "uint8";
    case Dtype::kInt8: return "int8";
  }
  return "?";
}

}  // namespace zerotrain::comm::shm
#endif  // HWY_ONCE
