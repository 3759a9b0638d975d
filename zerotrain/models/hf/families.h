// The model families zerotrain builds from a Hugging Face folder, each described once: what
// differs between GPT-2 and the Llama family (and the next one) is a FamilyDescriptor, and
// every shared piece (the config reader, the layout, the loader, the Model, the activation
// estimate) asks the folder's family through family_of() instead of naming one.
//
// A family is one file, models/hf/families/<name>.cpp, defining its descriptor (its module,
// its config.json fields, its parameters), plus one row in the table of families.cpp
// (docs/finetune.md, "Adding a model family"). No LibTorch: the module is built through a
// function pointer whose types are only declared here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/config/json_text.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/hf/hf_config.h"
#include "zerotrain/models/hf/hf_layout.h"

namespace zerotrain::models::hf {

class ParamMaker;    // hf_modules.h
struct HfCausalLm;   // hf_modules.h

struct FamilyDescriptor {
  std::string name;                        // "gpt2", "llama": HfModelConfig::family
  std::vector<std::string> model_types;    // the config.json model_types it builds
  // The name config.json gives HfModelConfig::max_positions ("n_positions").
  std::string max_positions_key;
  // The name the base model's parameters have under the causal LM ("transformer."); a folder
  // saved from the base model (GPT2Model, LlamaModel) lacks it.
  std::string base_model_prefix;
  // Name endings of the tensors an older save holds that are not parameters (GPT-2's
  // attn.bias masks), warned about and left unread as transformers leaves them.
  std::vector<std::string> ignorable_suffixes;

  // Reads the family's fields of config.json into `c` (model_type and family already set;
  // the token ids are read after it). Fails through `f`, naming the field.
  void (*read_config)(const ConfigFields& f, HfModelConfig& c);
  // Every parameter once, in the order the module registers them, with its ZeRO-3 unit
  // (hf_layout.h).
  std::vector<HfParam> (*params)(const HfModelConfig& c);
  // What the activation estimate needs per token (estimate::DecoderDims) at sequence length
  // `block`: decoder_dims_of() and what this family's modules keep for backward.
  estimate::DecoderDims (*decoder_dims)(const HfModelConfig& c, int64_t block);
  // The module, its parameters made by `make` (uninitialised; the loader fills them).
  std::shared_ptr<HfCausalLm> (*build)(const HfModelConfig& c, ParamMaker& make);
};

// Every family, in the table's order.
const std::vector<const FamilyDescriptor*>& families();
// The family that builds `model_type`; null for none.
const FamilyDescriptor* find_family(const std::string& model_type);
// The same; throws ConfigError naming the supported model_types for none.
const FamilyDescriptor& family_of(const std::string& model_type);
const FamilyDescriptor& family_of(const HfModelConfig& config);
// "gpt2, llama, mistral and qwen2": every family's model_types.
std::string supported_model_types();

// The family-independent dimensions of DecoderDims; a family's decoder_dims sets the rest
// (norm, mlp_saved).
estimate::DecoderDims decoder_dims_of(const HfModelConfig& c, int64_t block);

// Reads DIR/config.json. Throws ConfigError naming the file and the field: a model_type no
// family builds, a missing or out-of-range size, or a setting those models have that
// zerotrain does not implement.
HfModelConfig read_hf_config(const std::filesystem::path& dir);
HfModelConfig parse_hf_config(const config::Json& json, const std::string& origin);

}  // namespace zerotrain::models::hf
