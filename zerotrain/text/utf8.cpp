#include "zerotrain/text/utf8.h"

namespace zerotrain::text {
namespace {

// The length of the valid UTF-8 sequence at bytes[at], or 0 when the bytes there start an
// invalid one; `bad_length` is then the length of its maximal subpart (at least 1), the
// bytes one U+FFFD replaces. The ranges are those of the Unicode standard's table 3-7.
size_t valid_sequence_length(std::string_view bytes, size_t at, size_t& bad_length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const unsigned char lead = byte(at);
  bad_length = 1;
  if (lead < 0x80) return 1;
  size_t need = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;   // no UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;   // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (at + k >= bytes.size()) return 0;
    const unsigned char b = byte(at + k);
    const unsigned char lo = k == 1 ? second_lo : 0x80, hi = k == 1 ? second_hi : 0xBF;
    if (b < lo || b > hi) return 0;
    bad_length = k + 1;
  }
  return need;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  size_t bad = 0;
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = valid_sequence_length(bytes, at, bad);
    if (n == 0) return false;
    at += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t at = 0, clean_from = 0, bad = 0;
  while (at < bytes.size()) {
    if (static_cast<unsigned char>(bytes[at]) < 0x80) {   // the common case, kept cheap
      ++at;
      continue;
    }
    const size_t n = valid_sequence_length(bytes, at, bad);
    if (n != 0) {
      at += n;
      continue;
    }
    out.append(bytes.substr(clean_from, at - clean_from));
    out.append("\xEF\xBF\xBD");
    at += bad;
    clean_from = at;
  }
  out.append(bytes.substr(clean_from));
  return out;
}

char32_t next_code_point(std::string_view text, size_t& at) {
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[i])); };
  const char32_t lead = b(at);
  const size_t n = utf8_length(static_cast<unsigned char>(lead));
  if (n == 1 || at + n > text.size()) {
    ++at;
    return lead;
  }
  char32_t c = n == 2 ? (lead & 0x1F) : n == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (b(at + k) & 0x3F);
  at += n;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace zerotrain::text
