// The regexes of tokenizer.json (Split patterns, Replace patterns, the ByteLevel split),
// compiled with PCRE2 in UTF and Unicode-property mode and JIT-compiled. `tokenizers` runs them
// with Oniguruma; the one difference in the constructs these patterns use, what \s matches, is
// bridged when the pattern is compiled (regex.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zerotrain::text {

struct RegexMatch {
  size_t begin;   // byte offsets into the searched text
  size_t end;
};

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message and offset for a pattern it rejects.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Every non-overlapping match in `text` (valid UTF-8), left to right, appended to `out`.
  // An empty match is skipped, and the search goes on one character further, as Oniguruma's.
  void find_all(std::string_view text, std::vector<RegexMatch>& out) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

// A literal string as a pattern that matches exactly it.
std::string regex_quote(std::string_view literal);

}  // namespace zerotrain::text
