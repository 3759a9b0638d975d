// The datasets of `zerotrain train --dataset SPEC`: the data layer's readers (docs/data.md)
// and the synthetic data of the built-in models, as the Trainer's train and eval sets, with
// the shape that fixes the model's input and output sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zerotrain/data/dataset.h"
#include "zerotrain/models/model.h"

namespace zerotrain::tools {

struct TrainDataOptions {
  std::string spec;               // fashion-mnist | cifar10:PATH | mnist:PATH | text:PATH | kjv | synthetic
  std::string model;              // --model: synthetic data are the model's
  std::string model_config;       // --model_config: the synthetic data's dimensions, the text's block size
  int64_t seed = 42;
  int64_t max_train_samples = 0;  // 0: all
  int64_t max_eval_samples = 0;
  std::string tokenizer;          // --tokenizer: the folder of tokenizer.json (--model hf:DIR; default DIR)
  bool needs_eval = true;         // an eval split is opened only when something evaluates
};

struct TrainData {
  std::shared_ptr<const data::Dataset> train, eval;
  models::DataShape shape;
};

TrainData open_train_data(const TrainDataOptions& options);

}  // namespace zerotrain::tools
