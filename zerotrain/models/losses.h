// The evaluation sums the classifiers share.
#pragma once

#include <ATen/core/Tensor.h>

#include "zerotrain/models/model.h"

namespace zerotrain::models {

// Summed cross-entropy and correct predictions of fp32 logits [B, classes] against int64
// targets [B].
EvalSums classification_sums(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace zerotrain::models
