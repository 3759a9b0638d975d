// One document of a fine-tuning corpus, as packing sees it: a part the model reads but is not
// trained to produce (the prompt) and a part it is trained on. A "text" document has no prompt.
#pragma once

#include <cstdint>
#include <string>

namespace zerotrain::data::tokenized {

struct Document {
  std::string prompt;   // not trained (targets -100); empty for a "text" document
  std::string text;     // trained: the "text", or the "completion"
  int64_t line = 0;     // its line in a JSONL file, for errors; 0: not read from a line
};

}  // namespace zerotrain::data::tokenized
