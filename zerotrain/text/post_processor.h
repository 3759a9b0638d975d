// tokenizer.json's "post_processor": the special tokens an encode with
// add_special_tokens=true puts around a single text. Supported: TemplateProcessing (Llama's
// "<s> $A"), RobertaProcessing and BertProcessing (cls $A sep), ByteLevel (adds nothing)
// and a Sequence of them; null adds nothing.
#pragma once

#include "zerotrain/text/json_field.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace zerotrain::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void add_special_tokens(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& field);

}  // namespace zerotrain::text
