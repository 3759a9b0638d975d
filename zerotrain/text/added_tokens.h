// tokenizer.json's "added_tokens": strings (special tokens such as <|endoftext|>, and others)
// found in the text before the model sees it and encoded as their own id, never split. As in
// tokenizers, a token with normalized=false is looked for in the raw text, one with
// normalized=true in the normalized text (its own content normalized the same way), and
// single_word, lstrip and rstrip decide whether a match counts and what it takes with it.
#pragma once

#include "zerotrain/text/json_field.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zerotrain::text {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  // The text decode gives it: for a normalized token, its content normalized (what the text
  // it matched held, so the decoder inverts it), as tokenizers does.
  std::string decoded;
};

// A stretch of text: an added token's id, or text for the model (id -1).
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

// Finds the leftmost-longest occurrences of a set of strings, as aho-corasick's
// MatchKind::LeftmostLongest does; an added token is rare in text, so a first-byte table
// skips almost every position at once.
class TokenMatcher {
 public:
  void add(std::string pattern, size_t token_index);
  bool empty() const { return patterns_.empty(); }
  // The match that starts first at or after `from` (the longest there): {begin, end, token
  // index}; begin == npos for none.
  struct Match {
    size_t begin;
    size_t end;
    size_t token_index;
  };
  Match find(std::string_view text, size_t from) const;

 private:
  struct Pattern {
    std::string text;
    size_t token_index;
  };
  std::vector<Pattern> patterns_;
  std::array<std::vector<size_t>, 256> by_first_byte_;   // pattern indices, longest first
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // `list` is tokenizer.json's "added_tokens"; `normalizer` (may be null) normalizes the
  // contents of normalized tokens.
  AddedTokens(const JsonField& list, const Normalizer* normalizer);

  // The stretches of `text` (non-empty), in order: with raw_text the tokens with
  // normalized=false are looked for, otherwise those with normalized=true.
  std::vector<Segment> split(std::string_view text, bool raw_text) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized() const { return !normalized_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_of_id_;
  struct ContentHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_map<std::string, size_t, ContentHash, std::equal_to<>> index_of_content_;
  TokenMatcher raw_;
  TokenMatcher normalized_;
};

}  // namespace zerotrain::text
