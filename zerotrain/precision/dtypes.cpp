#include "zerotrain/precision/dtypes.h"

namespace zerotrain {

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "fp32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    default: return c10::toString(dtype);
  }
}

}  // namespace zerotrain

namespace zerotrain::precision {

at::ScalarType scalar_type(config::DType dtype) {
  switch (dtype) {
    case config::DType::kFp16: return at::kHalf;
    case config::DType::kBf16: return at::kBFloat16;
    case config::DType::kFp32: break;
  }
  return at::kFloat;
}

Dtypes dtypes_from_config(const Config& config) {
  Dtypes p;
  if (config.fp16_enabled()) p.model = at::kHalf;
  if (config.bf16_enabled()) p.model = at::kBFloat16;
  // engine.py communication_data_type: the training dtype unless the config names one.
  p.comm = config.communication_data_type ? scalar_type(*config.communication_data_type) : p.model;
  // engine.py: grad_accum_dtype defaults to fp32 for bf16 without ZeRO (BF16_Optimizer), to
  // the model's dtype otherwise.
  if (config.data_types.grad_accum_dtype) {
    p.accum = scalar_type(*config.data_types.grad_accum_dtype);
  } else {
    p.accum = config.bf16_enabled() && !config.zero_optimization.enabled() ? at::kFloat : p.model;
  }
  p.auto_cast = config.fp16_enabled() && config.fp16.auto_cast;
  return p;
}

}  // namespace zerotrain::precision
