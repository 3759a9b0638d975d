#include "zerotrain/data/tokenized/text_encoder.h"

#include "zerotrain/core/error.h"

namespace zerotrain::data::tokenized {

void check_encoder(const TextEncoder& encoder) {
  ZT_CHECK(static_cast<bool>(encoder.encode), UsageError, "the text encoder has no encode function");
  ZT_CHECK(encoder.vocab_size >= 1, UsageError, "the text encoder's vocabulary size is ", encoder.vocab_size,
           "; it must be at least 1");
  ZT_CHECK(encoder.eos_id >= 0 && encoder.eos_id < encoder.vocab_size, UsageError, "the text encoder's eos id ",
           encoder.eos_id, " is outside its vocabulary [0, ", encoder.vocab_size,
           "); a tokenizer without an end-of-text token cannot separate packed documents");
  ZT_CHECK(!encoder.bos_id || (*encoder.bos_id >= 0 && *encoder.bos_id < encoder.vocab_size), UsageError,
           "the text encoder's bos id ", encoder.bos_id.value_or(0), " is outside its vocabulary [0, ",
           encoder.vocab_size, ")");
}

}  // namespace zerotrain::data::tokenized
