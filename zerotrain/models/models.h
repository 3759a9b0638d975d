// The built-in models of `zerotrain train`: an MLP and a decoder-only transformer (GPT),
// configured by a preset and `key=value` overrides (--model_config preset=tiny,n_layer=4).
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "zerotrain/estimate/detailed.h"

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
  // "mlp" or "gpt", and the fields of --model_config after the preset and overrides.
  virtual std::string kind() const = 0;
  virtual const std::map<std::string, int64_t>& fields() const = 0;
};

// name: "mlp" or "gpt"; config: "preset=NAME,key=value,..." (empty: the tiny preset).
// Throws UsageError naming an unknown model, preset or key, or a bad value.
std::unique_ptr<Model> make_model(const std::string& name, const std::string& config);

// What `zerotrain estimate` needs of a module: its trainable parameters in model order,
// each tensor counted once however often it is registered (DeepSpeed's model_to_params),
// and the largest single module's own parameters (DeepSpeed's largest_layer_params).
estimate::ModelShape shape_of(torch::nn::Module& module, std::string name);
// The same for a built-in model, with its dimensions for the activation estimate.
estimate::ModelShape shape_of(Model& model);
// The same, computed from --model/--model_config without building the model (a 7B
// configuration would need its 28 GB of fp32 weights just to be counted).
estimate::ModelShape shape_of(const std::string& name, const std::string& config);

}  // namespace zerotrain::models
