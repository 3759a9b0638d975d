// A Hugging Face model folder's config.json, read for the causal language models zerotrain
// builds from such folders: what every family's config comes to (HfModelConfig), and the
// family-independent part of reading it (ConfigFields, the rotary scaling block). Each
// family reads its own fields (models/hf/families/*.cpp); parse_hf_config and read_hf_config,
// which pick the family by model_type, are in models/hf/families.h. Only what the
// architecture needs is kept; a model_type or a setting the C++ models do not implement is an
// error naming the field, never a model that computes something else.
// No LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/config/json_text.h"

namespace zerotrain::models::hf {

// Rotary scaling as the config names it (rope_scaling, or transformers 5's rope_parameters).
struct RopeScaling {
  std::string type = "default";    // default, linear, llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;    // llama3
  double high_freq_factor = 4.0;   // llama3
  int64_t original_max_position_embeddings = 0;   // llama3
};

struct HfModelConfig {
  std::string model_type;          // gpt2, llama, mistral, qwen2
  std::string family;              // the family that reads and builds it (families.h): gpt2, llama
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;        // = num_heads without grouped-query attention
  int64_t head_dim = 0;            // hidden_size / num_heads unless the config says otherwise
  int64_t intermediate_size = 0;   // the MLP's inner width (GPT-2: n_inner, default 4 x hidden)
  int64_t max_positions = 0;
  double norm_eps = 1e-5;
  std::string activation;          // gelu_new (GPT-2), silu (Llama family)
  bool tie_word_embeddings = true;
  bool qkv_bias = false;           // GPT-2 and Qwen2: biases on q, k and v
  bool out_bias = false;           // GPT-2: bias on the attention output projection
  bool mlp_bias = false;           // GPT-2; Llama's mlp_bias
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  std::optional<int64_t> sliding_window;   // Mistral: attention reaches this many tokens back
  std::optional<int64_t> bos_token_id, eos_token_id;
  // The dropout probabilities the config sets above 0 (GPT-2's resid_pdrop, embd_pdrop and
  // attn_pdrop are 0.1 unless set): the C++ models compute as transformers does in eval mode
  // and apply none, so a run built from such a folder says so (docs/finetune.md).
  std::vector<std::pair<std::string, double>> unapplied_dropout;
};

// Reads the fields of one config.json (or of one block of it), each error a ConfigError
// naming the file and the field ("rope_parameters.factor").
class ConfigFields {
 public:
  ConfigFields(const config::Json& json, std::string origin, std::string block = "");

  // The fields of the object at `field`; fails unless it is one.
  ConfigFields nested(const std::string& field) const;
  // `field` empty: the block itself.
  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  bool has(const std::string& field) const;

  // A missing field is `fallback`, or an error without one.
  int64_t integer(const std::string& field, std::optional<int64_t> fallback, int64_t min = 1) const;
  double number(const std::string& field, double fallback) const;
  bool flag(const std::string& field, bool fallback) const;
  std::string text(const std::string& field, const std::string& fallback) const;
  // A setting the C++ models do not implement, unless it has the value they compute.
  void require(const std::string& field, const config::Json& implemented, const std::string& why) const;
  // A token id: an integer, or the first of a list (Llama 3's several end-of-text ids).
  std::optional<int64_t> token(const std::string& field) const;
  const config::Json& json() const { return json_; }

 private:
  std::string name(const std::string& field) const;

  const config::Json& json_;
  std::string origin_;
  std::string block_;
};

// rope_scaling, or transformers 5's rope_parameters (which also holds rope_theta): for the
// families with rotary positions.
RopeScaling read_rope_scaling(const ConfigFields& block);

// DIR/config.json, the file that must be there; throws ConfigError when it is not.
std::filesystem::path config_json_of(const std::filesystem::path& dir);

// config.json's text for a folder whose weights are saved in `dtype` ("float32", "bfloat16",
// "float16"): its "dtype" and "torch_dtype" (transformers 5's name and the older one) say so,
// or "dtype" is added, since from_pretrained(dtype="auto") loads in the dtype the config
// names. The text comes back unchanged when it already says `dtype`. `origin` names the file
// in a ConfigError when the text is not a JSON object.
std::string config_text_for_dtype(const std::string& text, const std::string& dtype, const std::string& origin);

}  // namespace zerotrain::models::hf
