// A packed token stream as a language-modelling dataset (docs/finetune.md, "Data: JSONL and
// text"). Sample i covers positions [begin + i*T, begin + i*T + T + 1) of the stream: inputs the
// first T tokens, targets the next T, each -100 where that token is not trained (a prompt's, a
// bos). The tokens after the last whole block are not used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/data/dataset.h"
#include "zerotrain/data/tokenized/cache.h"
#include "zerotrain/data/tokenized/token_stream.h"

namespace zerotrain::data::tokenized {

inline constexpr int64_t kIgnoreIndex = -100;   // PyTorch's cross_entropy ignore_index

class TokenizedDataset final : public Dataset {
 public:
  // Positions [begin, end) of `stream`, which hold at least block_size + 1 tokens. `name`
  // starts the description ("jsonl data.jsonl train"); `documents` (-1: not shown) is counted in it.
  TokenizedDataset(TokenStream stream, int64_t begin, int64_t end, int64_t block_size, int64_t vocab_size,
                   const std::string& name, int64_t documents, CacheUse cache_use);

  int64_t size() const override { return blocks_; }
  const DatasetInfo& info() const override { return info_; }
  Batch get(const std::vector<int64_t>& indices) const override;

  int64_t tokens() const { return end_ - begin_; }
  int64_t masked_targets() const { return masked_; }   // of the size() * block_size targets
  CacheUse cache_use() const { return cache_use_; }

 private:
  TokenStream stream_;
  int64_t begin_, end_, block_size_, blocks_;
  int64_t masked_ = 0;
  CacheUse cache_use_;
  DatasetInfo info_;
};

}  // namespace zerotrain::data::tokenized
