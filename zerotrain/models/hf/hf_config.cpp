#include "zerotrain/models/hf/hf_config.h"

#include <set>

#include "zerotrain/core/error.h"

namespace zerotrain::models::hf {
namespace {

using config::Json;

// Reads the fields of one config.json (or of one block of it), each error naming the file
// and the field ("rope_parameters.factor").
class Fields {
 public:
  Fields(const Json& json, std::string origin, std::string block = "")
      : json_(json), origin_(std::move(origin)), block_(std::move(block)) {}

  // The fields of the object at `field`; fails unless it is one.
  Fields nested(const std::string& field) const {
    if (!json_[field].is_object()) fail(field, detail::str("expected an object, got ", json_[field].dump()));
    return Fields(json_[field], origin_, name(field));
  }

  // `field` empty: the block itself.
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ConfigError(detail::str(origin_, ": ", name(field), ": ", what));
  }
  bool has(const std::string& field) const { return json_.contains(field) && !json_[field].is_null(); }

  int64_t integer(const std::string& field, std::optional<int64_t> fallback, int64_t min = 1) const {
    if (!has(field)) {
      if (!fallback) fail(field, "missing; a model's config.json gives it (save the model with save_pretrained)");
      return *fallback;
    }
    const Json& v = json_[field];
    if (!v.is_number_integer()) fail(field, detail::str("expected an integer, got ", v.dump()));
    const int64_t value = v.get<int64_t>();
    if (value < min) fail(field, detail::str("must be at least ", min, ", got ", value));
    return value;
  }
  double number(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const Json& v = json_[field];
    if (!v.is_number()) fail(field, detail::str("expected a number, got ", v.dump()));
    return v.get<double>();
  }
  bool flag(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    const Json& v = json_[field];
    if (!v.is_boolean()) fail(field, detail::str("expected true or false, got ", v.dump()));
    return v.get<bool>();
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    const Json& v = json_[field];
    if (!v.is_string()) fail(field, detail::str("expected a string, got ", v.dump()));
    return v.get<std::string>();
  }
  // A setting the C++ models do not implement, unless it has the value they compute.
  void require(const std::string& field, const Json& implemented, const std::string& why) const {
    if (has(field) && json_[field] != implemented) {
      fail(field, detail::str(json_[field].dump(), " is not implemented (zerotrain computes ", implemented.dump(),
                              ": ", why, ")"));
    }
  }
  // A token id: an integer, or the first of a list (Llama 3's several end-of-text ids).
  std::optional<int64_t> token(const std::string& field) const {
    if (!has(field)) return std::nullopt;
    const Json& v = json_[field];
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
    if (!v.is_number_integer()) fail(field, detail::str("expected a token id, got ", v.dump()));
    return v.get<int64_t>();
  }
  const Json& json() const { return json_; }

 private:
  std::string name(const std::string& field) const {
    return block_.empty() ? field : field.empty() ? block_ : block_ + "." + field;
  }

  const Json& json_;
  std::string origin_;
  std::string block_;
};

void read_gpt2(const Fields& f, HfModelConfig& c) {
  c.family = Family::kGpt2;
  c.vocab_size = f.integer("vocab_size", std::nullopt);
  c.hidden_size = f.integer("n_embd", std::nullopt);
  c.num_layers = f.integer("n_layer", std::nullopt);
  c.num_heads = f.integer("n_head", std::nullopt);
  c.num_kv_heads = c.num_heads;
  c.max_positions = f.integer("n_positions", std::nullopt);
  c.intermediate_size = f.integer("n_inner", 4 * c.hidden_size);
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.activation = f.text("activation_function", "gelu_new");
  static const std::set<std::string> kActivations = {"gelu_new", "gelu_pytorch_tanh", "gelu"};
  if (!kActivations.count(c.activation)) {
    f.fail("activation_function", "\"" + c.activation + "\" is not implemented; give gelu_new, gelu_pytorch_tanh or gelu");
  }
  c.tie_word_embeddings = f.flag("tie_word_embeddings", true);
  c.qkv_bias = c.out_bias = c.mlp_bias = true;
  f.require("scale_attn_weights", true, "attention scores divided by the square root of the head size");
  f.require("scale_attn_by_inverse_layer_idx", false, "the same scale in every layer");
  f.require("reorder_and_upcast_attn", false, "attention in the model's dtype");
  f.require("add_cross_attention", false, "a decoder alone");
  if (c.hidden_size % c.num_heads != 0) {
    f.fail("n_head", detail::str(c.num_heads, " does not divide n_embd ", c.hidden_size));
  }
  c.head_dim = c.hidden_size / c.num_heads;
  for (const char* field : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
    if (const double p = f.number(field, 0.1); p > 0) c.unapplied_dropout.emplace_back(field, p);
  }
}

// rope_scaling, or transformers 5's rope_parameters (which also holds rope_theta).
RopeScaling read_rope_scaling(const Fields& block) {
  RopeScaling r;
  r.type = block.text(block.has("rope_type") ? "rope_type" : "type", "default");
  if (r.type == "default") return r;
  if (r.type == "linear") {
    r.factor = block.number("factor", 0);
    if (!(r.factor > 0)) block.fail("factor", "a linear rope scaling needs a factor above 0");
    return r;
  }
  if (r.type == "llama3") {
    r.factor = block.number("factor", 0);
    r.low_freq_factor = block.number("low_freq_factor", 0);
    r.high_freq_factor = block.number("high_freq_factor", 0);
    r.original_max_position_embeddings = block.integer("original_max_position_embeddings", 0);
    if (!(r.factor > 0) || !(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor) ||
        r.original_max_position_embeddings <= 0) {
      block.fail("", "a llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0");
    }
    return r;
  }
  block.fail("rope_type", "\"" + r.type + "\" is not implemented; zerotrain has default, linear and llama3");
}

void read_llama_family(const Fields& f, HfModelConfig& c) {
  c.family = Family::kLlama;
  if (const double p = f.number("attention_dropout", 0); p > 0) c.unapplied_dropout.emplace_back("attention_dropout", p);
  c.vocab_size = f.integer("vocab_size", std::nullopt);
  c.hidden_size = f.integer("hidden_size", std::nullopt);
  c.num_layers = f.integer("num_hidden_layers", std::nullopt);
  c.num_heads = f.integer("num_attention_heads", std::nullopt);
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  c.intermediate_size = f.integer("intermediate_size", std::nullopt);
  c.max_positions = f.integer("max_position_embeddings", std::nullopt);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.activation = f.text("hidden_act", "silu");
  if (c.activation != "silu") f.fail("hidden_act", "\"" + c.activation + "\" is not implemented; the Llama family's MLP is silu");
  c.tie_word_embeddings = f.flag("tie_word_embeddings", false);
  if (c.num_heads % c.num_kv_heads != 0) {
    f.fail("num_key_value_heads", detail::str(c.num_kv_heads, " does not divide num_attention_heads ", c.num_heads));
  }
  if (!f.has("head_dim") && c.hidden_size % c.num_heads != 0) {
    f.fail("num_attention_heads", detail::str(c.num_heads, " does not divide hidden_size ", c.hidden_size,
                                              " (and there is no head_dim)"));
  }
  c.head_dim = f.integer("head_dim", c.hidden_size / c.num_heads);
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;   // Qwen2's q, k and v projections always have biases; its output projection has none
    f.require("use_sliding_window", false, "full attention in every layer");
  } else {
    c.qkv_bias = c.out_bias = f.flag("attention_bias", false);
  }
  if (c.model_type == "llama") c.mlp_bias = f.flag("mlp_bias", false);
  // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; earlier ones rope_theta
  // and rope_scaling beside the other fields.
  if (f.has("rope_parameters")) {
    const Fields p = f.nested("rope_parameters");
    c.rope_theta = p.number("rope_theta", c.rope_theta);
    c.rope_scaling = read_rope_scaling(p);
  } else {
    c.rope_theta = f.number("rope_theta", 10000.0);
    if (f.has("rope_scaling")) c.rope_scaling = read_rope_scaling(f.nested("rope_scaling"));
  }
  if (!(c.rope_theta > 0)) f.fail("rope_theta", detail::str("must be above 0, got ", c.rope_theta));
  if (c.model_type == "mistral" && f.has("sliding_window")) c.sliding_window = f.integer("sliding_window", std::nullopt);
}

}  // namespace

HfModelConfig parse_hf_config(const config::Json& json, const std::string& origin) {
  if (!json.is_object()) throw ConfigError(origin + ": expected a JSON object (a model's config.json)");
  const Fields f(json, origin);
  HfModelConfig c;
  c.model_type = f.text("model_type", "");
  if (c.model_type == "gpt2") {
    read_gpt2(f, c);
  } else if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2") {
    read_llama_family(f, c);
  } else {
    f.fail("model_type", (c.model_type.empty() ? std::string("missing") : "\"" + c.model_type + "\" is not supported") +
                             "; zerotrain builds gpt2, llama, mistral and qwen2 models from a folder");
  }
  c.bos_token_id = f.token("bos_token_id");
  c.eos_token_id = f.token("eos_token_id");
  return c;
}

std::string config_text_for_dtype(const std::string& text, const std::string& dtype, const std::string& origin) {
  config::Json json = config::parse_json_text(text, origin);
  if (!json.is_object()) throw ConfigError(origin + ": expected a JSON object (a model's config.json)");
  bool named = false, stale = false;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!json.contains(key)) continue;
    named = true;
    if (json[key] != dtype) {
      json[key] = dtype;
      stale = true;
    }
  }
  if (!named) json["dtype"] = dtype;
  if (named && !stale) return text;
  return json.dump(2) + "\n";   // save_pretrained's indent
}

HfModelConfig read_hf_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw ConfigError(detail::str(dir.string(), ": no config.json; a Hugging Face model folder has one (written by "
                                  "save_pretrained)"));
  }
  return parse_hf_config(config::read_json_file(file), file.string());
}

}  // namespace zerotrain::models::hf
