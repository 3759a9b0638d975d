// The built-in models of `zerotrain train` and the Trainer: an MLP, a decoder-only
// transformer (GPT) and the ConvNet, configured by a preset and `key=value` overrides
// (--model_config preset=tiny,n_layer=4) and by the dataset they train on.
#pragma once

#include <memory>
#include <string>

#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/model.h"

namespace zerotrain::models {

// name: "mlp", "gpt" or "convnet", or hf:DIR for a Hugging Face folder (models/hf/hf_model.h); config: "preset=NAME,key=value,..." (empty: the
// model's default preset); data: what the dataset fixes (channels, classes, vocabulary).
// Throws UsageError naming an unknown model, preset or key, a bad value, or a dataset the
// model cannot train on.
std::unique_ptr<Model> make_model(const std::string& name, const std::string& config, const DataShape& data = {});

// What `zerotrain estimate` needs of a module: its trainable parameters in model order,
// each tensor counted once however often it is registered (DeepSpeed's model_to_params),
// and the largest single module's own parameters (DeepSpeed's largest_layer_params).
estimate::ModelShape shape_of(torch::nn::Module& module, std::string name);
// The same for a built-in model, with its dimensions for the activation estimate.
estimate::ModelShape shape_of(Model& model);
// The same, computed from the name and config without building the model (a 7B
// configuration would need its 28 GB of fp32 weights just to be counted).
estimate::ModelShape shape_of(const std::string& name, const std::string& config, const DataShape& data = {});
// HF's hidden_size of the model (the width that fills the ZeRO bucket sizes' "auto").
int64_t hidden_size_of(const std::string& name, const std::string& config, const DataShape& data = {});

}  // namespace zerotrain::models
