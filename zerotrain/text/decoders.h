// tokenizer.json's "decoder": how tokens turn back into text. Supported: ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace and a Sequence of them (Llama 2's); null joins the
// tokens with spaces, as tokenizers does.
#pragma once

#include "zerotrain/text/json_field.h"

#include <memory>
#include <string>
#include <vector>

namespace zerotrain::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // One step of tokenizers' decode_chain: tokens in, tokens (or pieces of text) out.
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const JsonField& field);

}  // namespace zerotrain::text
