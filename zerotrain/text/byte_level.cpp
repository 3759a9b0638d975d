#include "zerotrain/text/byte_level.h"

#include "zerotrain/text/utf8.h"

#include <array>

namespace zerotrain::text {
namespace {

// GPT-2's bytes_to_unicode(): the printable Latin-1 bytes stand for themselves; the others
// (controls, space, soft hyphen...) take the code points from U+0100 up, in byte order.
struct Alphabet {
  std::array<std::string, 256> char_of_byte;
  std::array<int, 512> byte_of_char;   // every alphabet code point is below U+0144

  Alphabet() {
    byte_of_char.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : next_extra++;
      append_utf8(char_of_byte[b], c);
      byte_of_char[c] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return alphabet().char_of_byte[b]; }

void append_byte_level(std::string& out, std::string_view bytes) {
  const auto& table = alphabet().char_of_byte;
  for (const char byte : bytes) out.append(table[static_cast<unsigned char>(byte)]);
}

int byte_level_byte(char32_t c) { return c < 512 ? alphabet().byte_of_char[c] : -1; }

}  // namespace zerotrain::text
