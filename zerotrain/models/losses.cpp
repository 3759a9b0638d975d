#include "zerotrain/models/losses.h"

#include <torch/torch.h>

namespace zerotrain::models {

EvalSums classification_sums(const at::Tensor& logits, const at::Tensor& targets) {
  const auto loss_sum = torch::cross_entropy_loss(logits, targets, {}, at::Reduction::Sum);
  const auto correct = logits.argmax(1).eq(targets).sum();
  return {loss_sum.item<double>(), targets.size(0), correct.item<int64_t>()};
}

}  // namespace zerotrain::models
