// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable code point,
// so that a BPE vocabulary over text can spell any byte string. The ByteLevel pre-tokenizer
// maps bytes to these characters; its decoder maps them back.
#pragma once

#include <string>
#include <string_view>

namespace zerotrain::text {

// The UTF-8 of the character standing for byte `b`.
const std::string& byte_level_char(unsigned char b);
// `bytes` spelled in the byte-level alphabet, appended to `out`.
void append_byte_level(std::string& out, std::string_view bytes);
// The byte a byte-level character stands for, or -1 for a character outside the alphabet.
int byte_level_byte(char32_t c);

}  // namespace zerotrain::text
