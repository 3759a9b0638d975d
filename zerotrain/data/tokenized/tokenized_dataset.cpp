#include "zerotrain/data/tokenized/tokenized_dataset.h"

#include <ATen/ATen.h>

#include <cmath>

#include "zerotrain/core/error.h"

namespace zerotrain::data::tokenized {
namespace {

// "12%"; "<1%" for a few masked targets, so that a mask that works never reads as 0%.
std::string percent(int64_t part, int64_t whole) {
  if (part == 0 || whole == 0) return "0%";
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  if (p < 1.0) return "<1%";
  return std::to_string(static_cast<int64_t>(std::llround(p))) + "%";
}

}  // namespace

TokenizedDataset::TokenizedDataset(TokenStream stream, int64_t begin, int64_t end, int64_t block_size,
                                   int64_t vocab_size, const std::string& name, int64_t documents, CacheUse cache_use)
    : stream_(std::move(stream)), begin_(begin), end_(end), block_size_(block_size), cache_use_(cache_use) {
  ZT_INTERNAL_ASSERT(block_size_ >= 1 && begin_ >= 0 && end_ <= stream_.size() && end_ - begin_ >= block_size_ + 1,
                     name, ": positions [", begin_, ", ", end_, ") of ", stream_.size(),
                     " cannot hold one block of ", block_size_);
  blocks_ = (end_ - begin_ - 1) / block_size_;
  const int64_t targets = blocks_ * block_size_;
  for (int64_t p = begin_ + 1; p <= begin_ + targets; ++p) masked_ += stream_.trained[static_cast<size_t>(p)] == 0;
  info_.task = Task::kLanguageModeling;
  info_.vocab_size = vocab_size;
  info_.block_size = block_size_;
  info_.description = name + " (" +
                      (documents >= 0 ? std::to_string(documents) + (documents == 1 ? " document, " : " documents, ")
                                      : std::string()) +
                      std::to_string(end_ - begin_) + " tokens: " + std::to_string(blocks_) +
                      (blocks_ == 1 ? " block of " : " blocks of ") +
                      std::to_string(block_size_) + ", " + percent(masked_, targets) + " of targets masked)";
}

Batch TokenizedDataset::get(const std::vector<int64_t>& indices) const {
  check_sample_indices(indices, size(), info_);
  const auto batch = static_cast<int64_t>(indices.size());
  at::Tensor inputs = at::empty({batch, block_size_}, at::kLong);
  at::Tensor targets = at::empty({batch, block_size_}, at::kLong);
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* out = targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const auto first = static_cast<size_t>(begin_ + indices[static_cast<size_t>(b)] * block_size_);
    const int32_t* tokens = stream_.tokens.data() + first;
    const uint8_t* trained = stream_.trained.data() + first;
    for (int64_t t = 0; t < block_size_; ++t) {
      in[b * block_size_ + t] = tokens[t];
      out[b * block_size_ + t] = trained[t + 1] ? tokens[t + 1] : kIgnoreIndex;
    }
  }
  return {std::move(inputs), std::move(targets)};
}

}  // namespace zerotrain::data::tokenized
