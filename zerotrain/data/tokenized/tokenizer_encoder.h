// A text::Tokenizer as the TextEncoder the tokenised datasets take. In its own file (and its
// own library) so that the data layer and its tests build without the tokenizer.
#pragma once

#include "zerotrain/data/tokenized/text_encoder.h"
#include "zerotrain/text/tokenizer.h"

namespace zerotrain::data::tokenized {

// The encoder keeps a reference to `tokenizer`, which must outlive it. `add_bos`: start every
// document with the tokenizer's bos (what models trained with one expect: Llama). ConfigError
// when the tokenizer has no eos (documents could not be separated) or add_bos and no bos.
TextEncoder encoder_of(const text::Tokenizer& tokenizer, bool add_bos = false);
// A temporary tokenizer would be gone before the encoder is used.
TextEncoder encoder_of(text::Tokenizer&& tokenizer, bool add_bos = false) = delete;

}  // namespace zerotrain::data::tokenized
