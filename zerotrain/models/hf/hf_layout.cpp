#include "zerotrain/models/hf/hf_layout.h"

#include <string>

namespace zerotrain::models::hf {

int64_t HfParam::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HfParam::module() const {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

std::string base_model_prefix(const HfModelConfig& config) {
  return config.family == Family::kGpt2 ? "transformer." : "model.";
}

namespace {

// GPT2LMHeadModel: transformer.{wte, wpe, h.N, ln_f}, lm_head. Units: wte 1, block i 2 + i,
// the head L + 2 (it owns a parameter only when untied).
void gpt2(const HfModelConfig& c, std::vector<HfParam>& out) {
  const int64_t e = c.hidden_size, inner = c.intermediate_size;
  out.push_back({"transformer.wte.weight", {c.vocab_size, e}, 1});
  out.push_back({"transformer.wpe.weight", {c.max_positions, e}, 0});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    const int unit = static_cast<int>(2 + i);
    out.push_back({p + "ln_1.weight", {e}, unit});
    out.push_back({p + "ln_1.bias", {e}, unit});
    out.push_back({p + "attn.c_attn.weight", {e, 3 * e}, unit});
    out.push_back({p + "attn.c_attn.bias", {3 * e}, unit});
    out.push_back({p + "attn.c_proj.weight", {e, e}, unit});
    out.push_back({p + "attn.c_proj.bias", {e}, unit});
    out.push_back({p + "ln_2.weight", {e}, unit});
    out.push_back({p + "ln_2.bias", {e}, unit});
    out.push_back({p + "mlp.c_fc.weight", {e, inner}, unit});
    out.push_back({p + "mlp.c_fc.bias", {inner}, unit});
    out.push_back({p + "mlp.c_proj.weight", {inner, e}, unit});
    out.push_back({p + "mlp.c_proj.bias", {e}, unit});
  }
  out.push_back({"transformer.ln_f.weight", {e}, 0});
  out.push_back({"transformer.ln_f.bias", {e}, 0});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, e}, static_cast<int>(2 + c.num_layers)});
}

// LlamaForCausalLM (and Mistral's, Qwen2's): model.{embed_tokens, layers.N, norm}, lm_head.
// A layer registers self_attn, mlp, then its two norms, as transformers' does.
void llama(const HfModelConfig& c, std::vector<HfParam>& out) {
  const int64_t e = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t inner = c.intermediate_size;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, e}, 1});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int unit = static_cast<int>(2 + i);
    auto linear = [&](const std::string& name, int64_t out_features, int64_t in_features, bool bias) {
      out.push_back({p + name + ".weight", {out_features, in_features}, unit});
      if (bias) out.push_back({p + name + ".bias", {out_features}, unit});
    };
    linear("self_attn.q_proj", q, e, c.qkv_bias);
    linear("self_attn.k_proj", kv, e, c.qkv_bias);
    linear("self_attn.v_proj", kv, e, c.qkv_bias);
    linear("self_attn.o_proj", e, q, c.out_bias);
    linear("mlp.gate_proj", inner, e, c.mlp_bias);
    linear("mlp.up_proj", inner, e, c.mlp_bias);
    linear("mlp.down_proj", e, inner, c.mlp_bias);
    out.push_back({p + "input_layernorm.weight", {e}, unit});
    out.push_back({p + "post_attention_layernorm.weight", {e}, unit});
  }
  out.push_back({"model.norm.weight", {e}, 0});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, e}, static_cast<int>(2 + c.num_layers)});
}

}  // namespace

std::vector<HfParam> hf_params(const HfModelConfig& config) {
  std::vector<HfParam> out;
  if (config.family == Family::kGpt2) {
    gpt2(config, out);
  } else {
    llama(config, out);
  }
  return out;
}

}  // namespace zerotrain::models::hf
