// The dtypes of a training step, as DeepSpeed reads them from the fp16/bf16 blocks
// (docs/precision.md), and the names the config uses for them.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "zerotrain/config/config.h"

namespace zerotrain {

// "fp32", "bf16", "fp16" (the config's names), else LibTorch's name of the dtype. Public
// (zerotrain/zerotrain.h); declared here only.
std::string dtype_name(at::ScalarType dtype);

}  // namespace zerotrain

namespace zerotrain::precision {

using zerotrain::dtype_name;

struct Dtypes {
  at::ScalarType model = at::kFloat;   // parameters, activations, the gradients autograd makes
  at::ScalarType comm = at::kFloat;    // gradients on the wire: communication_data_type
  at::ScalarType accum = at::kFloat;   // gradients summed over micro-steps: data_types.grad_accum_dtype
  bool auto_cast = false;              // fp16.auto_cast: floating inputs cast to fp16
  bool half() const { return model != at::kFloat; }
};

Dtypes dtypes_from_config(const Config& config);

at::ScalarType scalar_type(config::DType dtype);

}  // namespace zerotrain::precision
