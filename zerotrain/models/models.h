// The built-in models of `zerotrain train`: an MLP and a decoder-only transformer (GPT),
// configured by a preset and `key=value` overrides (--model_config preset=tiny,n_layer=4).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>

namespace zerotrain::models {

// A built-in model: its module, and how a batch of its synthetic data becomes a loss.
class Model {
 public:
  virtual ~Model() = default;
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  // Mean loss over the batch (inputs and targets from data::SyntheticDataset).
  virtual at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) = 0;
  virtual std::string describe() const = 0;
  // The synthetic dataset's shape for this model: (n_in, n_out) or (vocab_size, block_size).
  virtual std::pair<int64_t, int64_t> data_dims() const = 0;
};

// name: "mlp" or "gpt"; config: "preset=NAME,key=value,..." (empty: the tiny preset).
// Throws UsageError naming an unknown model, preset or key, or a bad value.
std::unique_ptr<Model> make_model(const std::string& name, const std::string& config);

}  // namespace zerotrain::models
