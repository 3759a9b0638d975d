// The pieces the models built from Hugging Face folders are made of (families/gpt2.cpp,
// families/llama.cpp), each computing what its transformers counterpart computes in eval mode,
// with its parameters named and laid out as transformers stores them, so that a parameter's
// name without the Sharded wrappers' ".module" is its tensor's name in the folder and the
// file's bytes are the parameter's.
//
// Parameters are created with at::empty and never initialised: the loader (hf_load.h) writes
// every one, and under ZeroInit a unit's parameters are cut before anything touches their
// memory, so their pages are never resident.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "zerotrain/activation/checkpoint.h"
#include "zerotrain/models/hf/hf_config.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models::hf {

// Creates the parameters and remembers each one's name in the folder: a unit built under
// ZeroInit is cut inside its constructor, before the model knows where it is registered, and
// the loader's chunk source finds the name here.
class ParamMaker {
 public:
  // An fp32 tensor of `shape`, uninitialised; `name` is its folder name.
  at::Tensor make(const std::string& name, at::IntArrayRef shape);
  // Null for a tensor it did not make.
  const std::string* name_of(const at::Tensor& param) const;

 private:
  std::unordered_map<const void*, std::string> names_;
};

// The causal LM as the Model (hf_model.cpp) drives it: token ids [B, T] -> logits [B, T, V]
// in the model's dtype. A family's descriptor builds it (families.h).
struct HfCausalLm : torch::nn::Module {
  virtual at::Tensor forward(const at::Tensor& ids) = 0;
  // --gradient_checkpointing: each decoder block keeps only its input (gpt.cpp's scheme).
  std::optional<activation::Checkpointer> checkpointer;
};

// nn.Linear: weight [out, in], an optional bias.
struct LinearImpl : torch::nn::Module {
  LinearImpl(ParamMaker& make, const std::string& name, int64_t in, int64_t out, bool bias);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;
};
TORCH_MODULE(Linear);

// nn.Embedding.
struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(ParamMaker& make, const std::string& name, int64_t count, int64_t dim);
  at::Tensor forward(const at::Tensor& ids);
  at::Tensor weight;
};
TORCH_MODULE(Embedding);

// The output projection, its weight another module's (the token embedding's): it owns no
// parameter of its own, and the folder has no tensor for it.
struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(at::Tensor embedding);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
};
TORCH_MODULE(TiedHead);

// The output projection both families end with, registered on the causal LM as "lm_head",
// its last ZeRO-3 unit: tied to the token embedding's weight (owning no parameter, and the
// folder has no tensor for it), or a Linear of its own when the config unties it.
class LmHead {
 public:
  LmHead() = default;
  LmHead(torch::nn::Module& lm, ParamMaker& make, const HfModelConfig& config, const at::Tensor& token_weight);
  at::Tensor operator()(const at::Tensor& x);

 private:
  zerotrain::Sharded<TiedHead> tied_{nullptr};
  zerotrain::Sharded<Linear> own_{nullptr};
};

// Scaled dot-product attention over q [B, H, T, D], k and v [B, KV, T, D] (KV dividing H,
// each kv head serving H / KV query heads as transformers' repeat_kv makes it). `mask`
// undefined: causal; else a boolean [T, T] of the pairs that attend.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask);

}  // namespace zerotrain::models::hf
