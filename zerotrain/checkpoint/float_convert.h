// Floating-point conversions for consolidating a checkpoint into another dtype (consolidate.h)
// without LibTorch, so the checkpoint reader and consolidation build in the fuzz target too.
// They give LibTorch's bits for every finite and infinite value: round to nearest, ties to
// even, as c10::BFloat16 and c10::Half do (tests/unit/consolidate_engine_test.cpp compares
// them with at::Tensor::to on every bf16 and fp16 boundary case). A NaN stays a NaN (its
// payload is not kept, as in LibTorch's scalar code).
#pragma once

#include <cstdint>
#include <cstring>

#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::checkpoint {

inline uint32_t bits_of(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float float_of(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bf16 is the top half of an fp32: add the rounding bias (ties to even on bit 16), truncate.
inline uint16_t bf16_from_float(float value) {
  const uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;   // NaN; c10 answers the same
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline float float_from_bf16(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

// fp16: 5 exponent bits (bias 15), 10 mantissa bits; below 2^-14 subnormal, from 65520 up
// infinite (65504 is the largest finite value, and 65520 is the tie that rounds up to inf).
inline uint16_t f16_from_float(float value) {
  const uint32_t bits = bits_of(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u;              // NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;             // inf, or rounds to it
  if (x >= 0x38800000u) {                                  // normal in fp16
    const uint32_t rebiased = x - ((127u - 15u) << 23);
    uint32_t half = rebiased >> 13;
    const uint32_t rest = rebiased & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;   // may carry into the exponent: right
    return static_cast<uint16_t>(sign | half);
  }
  if (x < 0x33000000u) return sign;                        // below 2^-25 (2^-25 itself ties to 0)
  // Subnormal: the value in units of 2^-24, which is the mantissa with its implicit bit
  // shifted right by (126 - exponent), rounded to nearest even.
  const uint32_t exponent = x >> 23;
  const uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;                  // 14..24
  uint32_t half = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float float_from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return float_of(sign | 0x7f800000u | (mantissa << 13));   // inf, NaN
  if (exponent != 0) return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_of(sign);
  uint32_t e = 113;   // normalise a subnormal: value = mantissa * 2^-24
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return float_of(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

inline bool is_floating(Dtype dtype) {
  return dtype == Dtype::kF16 || dtype == Dtype::kBF16 || dtype == Dtype::kF32 || dtype == Dtype::kF64;
}

// `numel` elements of floating dtype `from` at `src` into dtype `to` at `dst` (which must not
// overlap). A double becomes a 16-bit value through float, as LibTorch converts it.
void convert_floats(const void* src, Dtype from, void* dst, Dtype to, int64_t numel);

}  // namespace zerotrain::checkpoint
