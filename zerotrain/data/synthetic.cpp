#include "zerotrain/data/synthetic.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "zerotrain/core/error.h"

namespace zerotrain::data {

SyntheticDataset::SyntheticDataset(std::string model, int64_t dim0, int64_t dim1, uint64_t seed)
    : model_(std::move(model)), dim0_(dim0), dim1_(dim1), seed_(seed) {
  if (model_ == "mlp") {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_);
    teacher_ = at::randn({dim0_, dim1_}, gen) / std::sqrt(static_cast<double>(dim0_));
  }
}

Batch SyntheticDataset::batch(int64_t first, int64_t count) const {
  if (model_ == "mlp") {
    std::vector<at::Tensor> xs;
    for (int64_t i = first; i < first + count; ++i) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003 + static_cast<uint64_t>(i) + 1);
      xs.push_back(at::randn({dim0_}, gen));
    }
    auto x = at::stack(xs);
    return {x, at::tanh(at::matmul(x, teacher_))};
  }
  ZT_INTERNAL_ASSERT(model_ == "gpt", "unknown synthetic dataset ", model_);
  const int64_t vocab = dim0_, length = dim1_;
  const int64_t a = 1 + 2 * static_cast<int64_t>(seed_ % 7), c = 1 + static_cast<int64_t>(seed_ % 13);
  auto tokens = at::empty({count, length + 1}, at::kLong);
  auto t = tokens.accessor<int64_t, 2>();
  for (int64_t s = 0; s < count; ++s) {
    int64_t token = ((first + s) * 2654435761LL + static_cast<int64_t>(seed_)) % vocab;
    for (int64_t k = 0; k <= length; ++k) {
      t[s][k] = token;
      token = (a * token + c) % vocab;
    }
  }
  return {tokens.narrow(1, 0, length).contiguous(), tokens.narrow(1, 1, length).contiguous()};
}

}  // namespace zerotrain::data
