#include "zerotrain/text/added_tokens.h"

#include "zerotrain/text/normalizers.h"
#include "zerotrain/text/utf8.h"

#include <unicode/uchar.h>

#include <algorithm>

namespace zerotrain::text {
namespace {

// A word character at the boundary, for single_word: '_' or alphanumeric as Rust's
// char::is_alphanumeric has it (Unicode's Alphabetic property, or a number).
bool is_word_char(char32_t c) {
  const auto code = static_cast<UChar32>(c);
  return c == '_' || u_hasBinaryProperty(code, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(code) & U_GC_N_MASK) != 0;
}

char32_t last_code_point(std::string_view text) {
  size_t begin = text.size() - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return next_code_point(text, begin);
}

// Where the whitespace at the end of `text` starts.
size_t trailing_space_begin(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    size_t at = begin;
    if (!is_unicode_whitespace(next_code_point(text, at))) break;
    end = begin;
  }
  return end;
}

// How many bytes of whitespace `text` starts with.
size_t leading_space_length(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    size_t after = at;
    if (!is_unicode_whitespace(next_code_point(text, after))) break;
    at = after;
  }
  return at;
}

}  // namespace

void TokenMatcher::add(std::string pattern, size_t token_index) {
  if (pattern.empty()) return;
  const auto first = static_cast<unsigned char>(pattern[0]);
  patterns_.push_back({std::move(pattern), token_index});
  auto& list = by_first_byte_[first];
  list.push_back(patterns_.size() - 1);
  std::stable_sort(list.begin(), list.end(),
                   [&](size_t a, size_t b) { return patterns_[a].text.size() > patterns_[b].text.size(); });
}

TokenMatcher::Match TokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t at = from; at < text.size(); ++at) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[at])];
    for (const size_t index : candidates) {
      const std::string& p = patterns_[index].text;
      if (text.compare(at, p.size(), p) == 0) return {at, at + p.size(), patterns_[index].token_index};
    }
  }
  return {std::string_view::npos, 0, 0};
}

AddedTokens::AddedTokens(const JsonField& list, const Normalizer* normalizer) {
  if (list.json().is_null()) return;
  list.array();
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonField entry = list[i];
    AddedToken token;
    token.content = entry["content"].string();
    const int64_t id = entry["id"].integer();
    if (id < 0 || id > INT32_MAX) entry["id"].fail("expected an id from 0 to 2^31-1, got " + std::to_string(id));
    token.id = static_cast<int32_t>(id);
    token.special = entry.has("special") && entry["special"].boolean();
    token.single_word = entry.has("single_word") && entry["single_word"].boolean();
    token.lstrip = entry.has("lstrip") && entry["lstrip"].boolean();
    token.rstrip = entry.has("rstrip") && entry["rstrip"].boolean();
    token.normalized = entry.has("normalized") ? entry["normalized"].boolean() : !token.special;
    if (token.content.empty()) entry["content"].fail("an added token cannot be empty");
    tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    AddedToken& token = tokens_[i];
    index_of_id_.emplace(token.id, i);
    index_of_content_.emplace(token.content, i);
    token.decoded = token.content;
    if (!token.normalized) {
      raw_.add(token.content, i);
      continue;
    }
    if (normalizer != nullptr) normalizer->normalize(token.decoded);
    normalized_.add(token.decoded, i);
  }
}

std::vector<Segment> AddedTokens::split(std::string_view text, bool raw_text) const {
  const TokenMatcher& matcher = raw_text ? raw_ : normalized_;
  std::vector<Segment> out;
  size_t covered = 0;   // the end of what the segments so far take
  for (size_t from = 0; !matcher.empty() && from < text.size();) {
    const TokenMatcher::Match match = matcher.find(text, from);
    if (match.begin == std::string_view::npos) break;
    from = match.end;   // the next search starts after this match, whether it counts or not
    const AddedToken& token = tokens_[match.token_index];
    size_t begin = match.begin, end = match.end;
    if (token.single_word) {
      const bool word_before = begin > 0 && is_word_char(last_code_point(text.substr(0, begin)));
      size_t after = end;
      const bool word_after = end < text.size() && is_word_char(next_code_point(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) begin = std::max(trailing_space_begin(text.substr(0, begin)), covered);
    if (token.rstrip) end += leading_space_length(text.substr(end));
    if (covered < begin) out.push_back({covered, begin, -1});
    out.push_back({begin, end, token.id});
    covered = end;
  }
  if (covered < text.size()) out.push_back({covered, text.size(), -1});
  return out;
}

const AddedToken* AddedTokens::by_id(int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::by_content(std::string_view content) const {
  const auto it = index_of_content_.find(content);
  return it == index_of_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace zerotrain::text
