// One batch of samples, as a dataset returns it and the Trainer consumes it.
#pragma once

#include <ATen/core/Tensor.h>

namespace zerotrain::data {

struct Batch {
  at::Tensor inputs;    // images: (B, C, H, W) fp32; text: (B, T) int64; synthetic: see synthetic.h
  at::Tensor targets;   // class labels: (B,) int64; next tokens: (B, T) int64; regression: (B, n_out) fp32
};

}  // namespace zerotrain::data
