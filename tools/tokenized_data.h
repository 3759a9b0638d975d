// The datasets of `zerotrain train --model hf:DIR` (docs/finetune.md): text:PATH and
// jsonl:PATH tokenised with the model's tokenizer.json (or --tokenizer DIR's), packed into
// blocks of the model's block size, cached beside the file.
#pragma once

#include "tools/train_data.h"

namespace zerotrain::tools {

// Whether --model names a Hugging Face folder ("hf:DIR").
bool is_hf_model(const std::string& model);

// UsageError for a dataset spec these models cannot train on (images, synthetic data), IoError
// or ConfigError for a tokenizer or data file that cannot be read, naming the file.
TrainData open_tokenized_train_data(const TrainDataOptions& options);

}  // namespace zerotrain::tools
