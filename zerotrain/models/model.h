// A built-in model of `zerotrain train` and the Trainer: its module, how a batch becomes a
// training loss, and how a batch is scored in evaluation.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/models/fields.h"

namespace zerotrain::activation {
struct CheckpointOptions;
}

namespace zerotrain::models {

// What evaluation reports besides the loss (HF's keys: eval_accuracy, eval_perplexity).
enum class EvalMetric { kNone, kAccuracy, kPerplexity };

// A batch's contribution to an evaluation: summed, so that ranks and batches add up
// exactly whatever their sizes. `count` is what the loss is averaged over (samples, or
// tokens for a language model).
struct EvalSums {
  double loss_sum = 0;
  int64_t count = 0;
  int64_t correct = 0;   // kAccuracy only
};

// The shape of the data a model is built for; the dataset decides it (Fashion-MNIST:
// images 1x28x28 in 10 classes; a byte-level text: 256 tokens).
struct DataShape {
  enum class Kind { kSynthetic, kImages, kText };
  Kind kind = Kind::kSynthetic;
  int64_t channels = 0, height = 0, width = 0, classes = 0;   // images
  int64_t vocab_size = 0;                                     // text
  std::string name;                                           // for messages: "fashion-mnist"
};

// What a model built from a Hugging Face folder needs to write one back (the Trainer's
// final model and --save_hf_steps): the folder's files besides the weights, and the name each
// parameter has there.
struct HfExport {
  // The folder's files to copy beside the weights (config.json, the tokenizer's): read by the
  // rank that writes, when it writes, so that asking costs nothing.
  std::vector<std::filesystem::path> files;
  std::function<std::string(const std::string&)> tensor_name;   // module name -> the folder's name
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  // Mean loss over the batch, in fp32 whatever dtype the model trains in.
  virtual at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) = 0;
  // Summed loss (and correct predictions) of a batch; called under NoGradGuard.
  virtual EvalSums eval_sums(const at::Tensor& inputs, const at::Tensor& targets) = 0;
  virtual EvalMetric eval_metric() const = 0;
  virtual std::string describe() const = 0;
  // The synthetic dataset's shape for this model: (n_in, n_out) or (vocab_size, block_size).
  virtual std::pair<int64_t, int64_t> data_dims() const = 0;
  // "mlp", "gpt" or "convnet", and the fields of --model_config after the preset, the
  // dataset's values and the overrides.
  virtual std::string kind() const = 0;
  virtual const Fields& fields() const = 0;
  // The width HF's Trainer calls hidden_size (it fills the ZeRO bucket sizes).
  virtual int64_t hidden_size() const = 0;
  // Set for a model built from a Hugging Face folder: it can be saved as one.
  virtual std::optional<HfExport> hf_export() const { return std::nullopt; }
  // --gradient_checkpointing: from now on the forward keeps only what
  // docs/activation-checkpointing.md says and recomputes the rest in backward.
  virtual void enable_gradient_checkpointing(const activation::CheckpointOptions& /*options*/) {
    ZT_CHECK(false, UsageError, "--gradient_checkpointing: --model ", kind(),
             " does not support it (its activations are small); the gpt does, or leave the flag out");
  }
};

}  // namespace zerotrain::models
