// tokenizer.json's "model" of type BPE: a vocabulary, ranked merges, and what to do with a
// character the vocabulary lacks (byte fallback to <0xNN> tokens, or the unknown token).
#pragma once

#include "zerotrain/text/flat_table.h"
#include "zerotrain/text/json_field.h"

#include <cstdint>
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zerotrain::text {

// Hashes std::string and std::string_view alike, so that a lookup builds no string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using TokenIds = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

class Bpe {
 public:
  // `model` is tokenizer.json's "model"; a ConfigError naming the field for what cannot be
  // run exactly (dropout, a merge of tokens the vocabulary lacks, ...).
  explicit Bpe(const JsonField& model);
  ~Bpe();

  // Appends the ids of one word (a pre-tokenizer's piece).
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(tokens_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void add_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  TokenIds vocab_;
  std::vector<std::string> tokens_;   // by id; "" where the vocabulary skips an id
  FlatTable<Merge> merges_;            // by pair_key(left id, right id)
  FlatTable<int32_t> char_ids_;        // the id of each one-character token, by code point
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::array<int32_t, 256> byte_ids_{};   // <0xNN>'s id, -1 where the vocabulary lacks it

  // Words seen before and their ids: most words of a text repeat. Bounded, and filled until
  // full (as tokenizers' own cache), so a long run's memory stays flat.
  static constexpr size_t kCacheWords = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, TextHash, std::equal_to<>> cache_;
};

}  // namespace zerotrain::text
