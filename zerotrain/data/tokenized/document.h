// One document of a fine-tuning corpus, as packing sees it: a part the model reads but is not
// trained to produce (the prompt) and a part it is trained on. A "text" document has no prompt.
#pragma once

#include <string>

namespace zerotrain::data::tokenized {

struct Document {
  std::string prompt;   // not trained (targets -100); empty for a "text" document
  std::string text;     // trained: the "text", or the "completion"
};

}  // namespace zerotrain::data::tokenized
