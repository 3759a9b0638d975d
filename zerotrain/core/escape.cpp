#include "zerotrain/core/escape.h"

#include <cstdint>
#include <cstdio>

namespace zerotrain::strings {
namespace {

void append_byte_escape(std::string& out, unsigned char byte) {
  char text[5];
  std::snprintf(text, sizeof text, "\\x%02x", byte);
  out += text;
}

// Code points that are valid but change how a terminal shows the text around them.
bool hides_or_reorders(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) ||        // C1 controls (CSI is U+009B)
         cp == 0x200e || cp == 0x200f ||      // left-to-right / right-to-left marks
         (cp >= 0x2028 && cp <= 0x202e) ||    // line and paragraph separators, bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069);      // bidi isolates
}

// The length of the valid UTF-8 sequence at text[i] and its code point, or 0 when the bytes
// there are not one (a stray continuation byte, a cut sequence, an overlong form, a surrogate,
// a code point past U+10FFFF).
size_t utf8_sequence(std::string_view text, size_t i, uint32_t& cp) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t length = 0;
  uint32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, cp = lead & 0x1fu, min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, cp = lead & 0x0fu, min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, cp = lead & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (next & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return length;
}

}  // namespace

std::string escape_for_display(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7f) {
        append_byte_escape(out, byte);
      } else {
        out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t length = utf8_sequence(text, i, cp);
    if (length == 0) {
      append_byte_escape(out, byte);
      ++i;
    } else if (hides_or_reorders(cp)) {
      char escaped[16];   // "\u" and up to six hex digits (U+10FFFF)
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(cp));
      out += escaped;
      i += length;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace zerotrain::strings
