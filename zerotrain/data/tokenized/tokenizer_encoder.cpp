#include "zerotrain/data/tokenized/tokenizer_encoder.h"

#include "zerotrain/core/error.h"

namespace zerotrain::data::tokenized {

TextEncoder encoder_of(const text::Tokenizer& tokenizer, bool add_bos) {
  const std::optional<int32_t> eos = tokenizer.eos_id();
  ZT_CHECK(eos.has_value(), ConfigError,
           "the tokenizer has no end-of-text token, which separates packed documents; name it as eos_token in the "
           "model folder's tokenizer_config.json");
  const std::optional<int32_t> bos = tokenizer.bos_id();
  ZT_CHECK(!add_bos || bos.has_value(), ConfigError,
           "documents should start with a bos token, but the tokenizer has none; name it as bos_token in the model "
           "folder's tokenizer_config.json, or do not ask for one");
  TextEncoder encoder;
  encoder.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text, /*add_special_tokens=*/false); };
  encoder.eos_id = *eos;
  if (add_bos) encoder.bos_id = bos;
  encoder.vocab_size = tokenizer.vocab_size();
  encoder.fingerprint = tokenizer.fingerprint();
  return encoder;
}

}  // namespace zerotrain::data::tokenized
