// What the tokenised datasets need of a tokenizer, as plain values: the data layer and its
// tests do not depend on the tokenizer's implementation (tokenizer_encoder.h makes one from a
// text::Tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::data::tokenized {

struct TextEncoder {
  // Text to ids, without special tokens. Called from several threads at once while a corpus
  // is packed, so it must be thread-safe; it is not kept after the open function returns.
  std::function<std::vector<int32_t>(std::string_view)> encode;
  int32_t eos_id = -1;              // ends every document of the packed stream
  std::optional<int32_t> bos_id;    // when set, starts every document (models trained with one)
  int64_t vocab_size = 0;           // every id must lie in [0, vocab_size)
  std::string fingerprint;          // the tokenizer's checksum: part of the cache key
};

// Throws UsageError naming what is missing or out of range (an eos outside the vocabulary...).
void check_encoder(const TextEncoder& encoder);

}  // namespace zerotrain::data::tokenized
