// tokenizer.json's "pre_tokenizer": how a normalized text is cut into the words the model
// tokenizes one by one. Supported: ByteLevel, Split, Metaspace, Digits, Whitespace,
// WhitespaceSplit and a Sequence of them; null is none.
#pragma once

#include "zerotrain/text/json_field.h"

#include <memory>
#include <string>
#include <vector>

namespace zerotrain::text {

struct Piece {
  std::string text;
  // Starts at offset 0 of the original text: Metaspace's prepend_scheme "first" prepends
  // its replacement to that piece only.
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by the pieces each is cut into (empty ones dropped).
  virtual void split(std::vector<Piece>& pieces) const = 0;
};

// nullptr for a null pre-tokenizer; a ConfigError naming the field for a type not supported.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field);

}  // namespace zerotrain::text
