// The parameters a model built from a Hugging Face folder has, from its config.json alone:
// each one's name in the folder (transformers' name), shape and ZeRO-3 unit, in the order the
// C++ module registers them. The loader checks the folder's tensors against this list before
// anything is built, and `zerotrain estimate` counts a 7B model without its 28 GB of weights.
// No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/models/hf/hf_config.h"

namespace zerotrain::models::hf {

struct HfParam {
  std::string name;              // "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;    // as stored (GPT-2's Conv1D weights are [in, out])
  int unit = 0;                  // the zerotrain::Sharded unit that owns it, numbered as
                                 // stages::stage3::find_units numbers them (0: none)
  int64_t numel() const;
  std::string module() const;    // the name without its last segment: the module that owns it
};

// Every parameter once: a head tied to the token embedding is that embedding's parameter,
// so it has no entry of its own (and the folder no tensor for it). The config's family
// (families.h) lists them.
std::vector<HfParam> hf_params(const HfModelConfig& config);

// The name the base model's parameters have under the causal LM ("transformer." for GPT-2,
// "model." for the Llama family); a folder saved from the base model (GPT2Model) lacks it.
std::string base_model_prefix(const HfModelConfig& config);

}  // namespace zerotrain::models::hf
