#include "zerotrain/data/text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"

namespace zerotrain::data {

TextDataset::TextDataset(at::Tensor tokens, int64_t block_size, const std::string& name)
    : tokens_(tokens.contiguous()), block_size_(block_size) {
  ZT_INTERNAL_ASSERT(tokens_.dim() == 1 && tokens_.scalar_type() == at::kByte, name, ": tokens must be (L,) uint8");
  ZT_INTERNAL_ASSERT(block_size_ >= 1 && tokens_.size(0) >= block_size_ + 1, name, ": ", tokens_.size(0),
                     " bytes cannot hold one block of ", block_size_);
  blocks_ = (tokens_.size(0) - 1) / block_size_;
  info_.task = Task::kLanguageModeling;
  info_.vocab_size = kByteVocabSize;
  info_.block_size = block_size_;
  info_.description = name + " (" + std::to_string(tokens_.size(0)) + " bytes: " + std::to_string(blocks_) +
                      " blocks of " + std::to_string(block_size_) + " tokens, byte-level vocabulary of 256)";
}

Batch TextDataset::get(const std::vector<int64_t>& indices) const {
  check_sample_indices(indices, size(), info_);
  const auto batch = static_cast<int64_t>(indices.size());
  at::Tensor inputs = at::empty({batch, block_size_}, at::kLong);
  at::Tensor targets = at::empty({batch, block_size_}, at::kLong);
  const uint8_t* bytes = tokens_.const_data_ptr<uint8_t>();
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* out = targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const uint8_t* block = bytes + indices[static_cast<size_t>(b)] * block_size_;
    for (int64_t t = 0; t < block_size_; ++t) {
      in[b * block_size_ + t] = block[t];
      out[b * block_size_ + t] = block[t + 1];
    }
  }
  return {std::move(inputs), std::move(targets)};
}

std::shared_ptr<const TextDataset> make_text_dataset(const std::string& text, Split split, int64_t block_size,
                                                     const std::string& source, const std::string& name) {
  ZT_CHECK(block_size >= 1, UsageError, name, ": block_size is ", block_size, "; it must be at least 1");
  const auto n = static_cast<int64_t>(text.size());
  const int64_t eval_bytes = n / 10;
  const int64_t train_bytes = n - eval_bytes;
  const int64_t begin = split == Split::kTrain ? 0 : train_bytes;
  const int64_t length = split == Split::kTrain ? train_bytes : eval_bytes;
  // The largest block both splits can hold, for the message.
  const int64_t largest = std::min(train_bytes, eval_bytes) - 1;
  ZT_CHECK(length >= block_size + 1, IoError, source, " is ", n, " bytes: its ", split_name(split), " split (",
           split == Split::kTrain ? "the first 90%, " : "the last 10%, ", length,
           " bytes) is too short for one block of ", block_size, " tokens, which needs ", block_size + 1, " bytes; ",
           largest >= 1 ? "use a block size of at most " + std::to_string(largest) + " or a longer text"
                        : std::string("use a longer text (at least ") + std::to_string(10 * (block_size + 1)) +
                              " bytes for this block size)");
  at::Tensor tokens = at::empty({length}, at::kByte);
  std::memcpy(tokens.data_ptr<uint8_t>(), text.data() + begin, static_cast<size_t>(length));
  return std::make_shared<const TextDataset>(std::move(tokens), block_size, name + " " + split_name(split));
}

std::shared_ptr<const TextDataset> load_text_file(const std::filesystem::path& path, Split split, int64_t block_size) {
  files::InputFile file(path, {.what = "plain text file"});
  const std::string text = file.read_all();
  return make_text_dataset(text, split, block_size, path.string(), "text " + path.filename().string());
}

}  // namespace zerotrain::data
