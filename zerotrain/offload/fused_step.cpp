#include "zerotrain/offload/fused_step.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <array>

#include "zerotrain/core/error.h"

namespace zerotrain::offload {
namespace {

// Elements per tile: its fp32 gradients (16 KiB) stay in L1/L2 between the conversion, the
// update and the write-out. A multiple of every SIMD width.
constexpr int64_t kTileNumel = 4096;
// Elements per task of the thread pool: big enough that a task's start-up is noise.
constexpr int64_t kGrainNumel = 1 << 15;

template <class T>
void to_float(const T* in, float divisor, float* out, int64_t n) {
  // ATen's div_ by a scalar divides by the scalar rounded to float; so does this, so that
  // offload gives the engine's bits.
  if (divisor == 1.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) / divisor;
  }
}

template <class T>
void from_float(const float* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);   // round to nearest even
}

void grads_to_float(const FusedStepArrays& a, int64_t begin, int64_t n, float divisor, float* out) {
  switch (a.grad_dtype) {
    case c10::ScalarType::Float: return to_float(static_cast<const float*>(a.grads) + begin, divisor, out, n);
    case c10::ScalarType::BFloat16: return to_float(static_cast<const c10::BFloat16*>(a.grads) + begin, divisor, out, n);
    case c10::ScalarType::Half: return to_float(static_cast<const c10::Half*>(a.grads) + begin, divisor, out, n);
    default: ZT_INTERNAL_ASSERT(false, "offload step: gradients in ", c10::toString(a.grad_dtype));
  }
}

void write_weights(const FusedStepArrays& a, int64_t begin, int64_t n) {
  if (a.weights_out == nullptr) return;
  const float* in = a.master + begin;
  switch (a.weights_dtype) {
    case c10::ScalarType::Float: return from_float(in, static_cast<float*>(a.weights_out) + begin, n);
    case c10::ScalarType::BFloat16: return from_float(in, static_cast<c10::BFloat16*>(a.weights_out) + begin, n);
    case c10::ScalarType::Half: return from_float(in, static_cast<c10::Half*>(a.weights_out) + begin, n);
    default: ZT_INTERNAL_ASSERT(false, "offload step: weights in ", c10::toString(a.weights_dtype));
  }
}

}  // namespace

void fused_adam_step(const optim::AdamCoefficients& c, const FusedStepArrays& a, float grad_divisor) {
  at::parallel_for(0, a.numel, kGrainNumel, [&](int64_t begin, int64_t end) {
    std::array<float, kTileNumel> grads;
    for (int64_t tile = begin; tile < end; tile += kTileNumel) {
      const int64_t n = std::min(kTileNumel, end - tile);
      const float* g = grads.data();
      if (a.grad_dtype == c10::ScalarType::Float && grad_divisor == 1.0f) {
        g = static_cast<const float*>(a.grads) + tile;   // nothing to convert
      } else {
        grads_to_float(a, tile, n, grad_divisor, grads.data());
      }
      optim::adam_update(c, a.master + tile, g, a.exp_avg + tile, a.exp_avg_sq + tile, n);
      write_weights(a, tile, n);
    }
  });
}

}  // namespace zerotrain::offload
