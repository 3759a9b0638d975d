// UTF-8 as the tokenizer needs it: the replacement of invalid bytes that Python's
// bytes.decode("utf-8", errors="replace") does, and reading/writing one code point.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zerotrain::text {

// `bytes` with each maximal invalid subpart replaced by U+FFFD (the Unicode "maximal subpart"
// practice, which Python and Rust's from_utf8_lossy both follow): the text `tokenizers` sees
// when a Python caller decodes the same bytes with errors="replace".
std::string to_valid_utf8(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

// The code point starting at text[at] of valid UTF-8; advances `at` past it.
char32_t next_code_point(std::string_view text, size_t& at);
// The byte length of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
void append_utf8(std::string& out, char32_t code_point);

// Unicode's White_Space property, which Rust's char::is_whitespace tests.
bool is_unicode_whitespace(char32_t c);

}  // namespace zerotrain::text
