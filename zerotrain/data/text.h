// Plain text as a language-modelling dataset (docs/data.md): a byte-level tokenizer (each
// byte is a token, vocabulary 256) and GPT-style blocks. Sample i covers bytes
// [i*T, i*T + T + 1) of its split: inputs the first T, targets the next T (shifted by one).
//
// Split: the last 10% of the bytes (floor(n / 10)) are held out for evaluation, the bytes
// before them train; a block never crosses the boundary, so no evaluation byte is trained on.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace zerotrain::data {

inline constexpr int64_t kByteVocabSize = 256;

class TextDataset final : public Dataset {
 public:
  // `tokens`: the split's bytes, (L,) uint8 with L >= block_size + 1. `name` starts the
  // description ("King James Bible train").
  TextDataset(at::Tensor tokens, int64_t block_size, const std::string& name);

  int64_t size() const override { return blocks_; }
  const DatasetInfo& info() const override { return info_; }
  Batch get(const std::vector<int64_t>& indices) const override;

 private:
  at::Tensor tokens_;   // (L,) uint8, contiguous
  int64_t block_size_;
  int64_t blocks_;      // (L - 1) / block_size
  DatasetInfo info_;
};

// `split` of `text` (which came from `source`, named in errors). A split too short for one
// block is an IoError naming the source, its size and the block size.
std::shared_ptr<const TextDataset> make_text_dataset(const std::string& text, Split split, int64_t block_size,
                                                     const std::string& source, const std::string& name);

// A text file read whole.
std::shared_ptr<const TextDataset> load_text_file(const std::filesystem::path& path, Split split, int64_t block_size);

}  // namespace zerotrain::data
