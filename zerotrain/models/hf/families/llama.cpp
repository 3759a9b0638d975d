// The Llama family (model_types llama, mistral, qwen2), all of it: its config.json fields, its
// parameters, what its layers keep for backward, and the module as transformers'
// LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM compute it in eval mode: RMSNorm,
// rotary positions (rotate_half, inverse frequencies of rope types default, linear and llama3),
// grouped-query attention, a SwiGLU MLP; Mistral's sliding window, Qwen2's q/k/v biases.
#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/models/hf/families.h"
#include "zerotrain/models/hf/hf_modules.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models::hf {
namespace {

// transformers' inverse frequencies, operation for operation in fp32 (a Python `s / t` is
// t.reciprocal() * s, `b ** t` is pow(b, t)), so cos and sin are its bits.
at::Tensor inverse_frequencies(const HfModelConfig& c) {
  const int64_t dim = c.head_dim;
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  at::Tensor inv_freq = at::pow(c.rope_theta, exponents).reciprocal() * 1.0;
  const RopeScaling& r = c.rope_scaling;
  if (r.type == "linear") return inv_freq / r.factor;
  if (r.type != "llama3") return inv_freq;
  // _compute_llama3_parameters: long wavelengths divided by `factor`, short ones kept, the
  // ones between interpolated.
  const double old_context = static_cast<double>(r.original_max_position_embeddings);
  const double low_wavelen = old_context / r.low_freq_factor, high_wavelen = old_context / r.high_freq_factor;
  const at::Tensor wavelen = inv_freq.reciprocal() * (2 * M_PI);
  at::Tensor llama = at::where(wavelen > low_wavelen, inv_freq / r.factor, inv_freq);
  const at::Tensor smooth = (wavelen.reciprocal() * old_context - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * llama / r.factor + smooth * llama;
  const at::Tensor medium = at::logical_not(wavelen < high_wavelen) * at::logical_not(wavelen > low_wavelen);
  return at::where(medium, smoothed, llama);
}

// LlamaRMSNorm: normalised in fp32, cast back, then scaled.
struct RmsNormImpl : torch::nn::Module {
  RmsNormImpl(ParamMaker& make, const std::string& name, int64_t dim, double eps) : eps(eps) {
    weight = register_parameter("weight", make.make(name + ".weight", {dim}));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = x.to(at::kFloat);
    const at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
    return weight * (h * at::rsqrt(variance + eps)).to(x.scalar_type());
  }
  double eps;
  at::Tensor weight;
};
TORCH_MODULE(RmsNorm);

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c)
      : heads(c.num_heads), kv_heads(c.num_kv_heads), head_dim(c.head_dim) {
    const int64_t e = c.hidden_size;
    q_proj = register_module("q_proj", Linear(make, p + "q_proj", e, heads * head_dim, c.qkv_bias));
    k_proj = register_module("k_proj", Linear(make, p + "k_proj", e, kv_heads * head_dim, c.qkv_bias));
    v_proj = register_module("v_proj", Linear(make, p + "v_proj", e, kv_heads * head_dim, c.qkv_bias));
    o_proj = register_module("o_proj", Linear(make, p + "o_proj", heads * head_dim, e, c.out_bias));
  }
  // cos, sin: [T, head_dim] in x's dtype; mask: attention()'s.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask) {
    const int64_t b = x.size(0), t = x.size(1);
    auto q = q_proj(x).view({b, t, -1, head_dim}).transpose(1, 2);
    auto k = k_proj(x).view({b, t, -1, head_dim}).transpose(1, 2);
    auto v = v_proj(x).view({b, t, -1, head_dim}).transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    auto y = attention(q, k, v, mask);
    return o_proj(y.transpose(1, 2).contiguous().reshape({b, t, -1}).contiguous());
  }
  int64_t heads, kv_heads, head_dim;
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c) {
    gate_proj = register_module("gate_proj", Linear(make, p + "gate_proj", c.hidden_size, c.intermediate_size, c.mlp_bias));
    up_proj = register_module("up_proj", Linear(make, p + "up_proj", c.hidden_size, c.intermediate_size, c.mlp_bias));
    down_proj = register_module("down_proj", Linear(make, p + "down_proj", c.intermediate_size, c.hidden_size, c.mlp_bias));
  }
  at::Tensor forward(const at::Tensor& x) { return down_proj(at::silu(gate_proj(x)) * up_proj(x)); }
  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c) {
    self_attn = register_module("self_attn", Attention(make, p + "self_attn.", c));
    mlp = register_module("mlp", Mlp(make, p + "mlp.", c));
    input_layernorm = register_module("input_layernorm", RmsNorm(make, p + "input_layernorm", c.hidden_size, c.norm_eps));
    post_attention_layernorm = register_module(
        "post_attention_layernorm", RmsNorm(make, p + "post_attention_layernorm", c.hidden_size, c.norm_eps));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask) {
    auto h = x + self_attn(input_layernorm(x), cos, sin, mask);
    return h + mlp(post_attention_layernorm(h));
  }
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

// LlamaModel: embed_tokens and each layer are ZeRO-3 units; the final norm stays with the model.
struct BaseModelImpl : torch::nn::Module {
  BaseModelImpl(ParamMaker& make, const HfModelConfig& c) {
    Embedding token(make, "model.embed_tokens", c.vocab_size, c.hidden_size);
    token_weight = token->weight;
    embed_tokens = register_module("embed_tokens", zerotrain::Sharded<Embedding>(token));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      units.emplace_back(DecoderLayer(make, "model.layers." + std::to_string(i) + ".", c));
      layers->push_back(units.back());
    }
    register_module("layers", layers);
    norm = register_module("norm", RmsNorm(make, "model.norm", c.hidden_size, c.norm_eps));
  }
  zerotrain::Sharded<Embedding> embed_tokens{nullptr};
  torch::nn::ModuleList layers;
  std::vector<zerotrain::Sharded<DecoderLayer>> units;   // the modules in `layers`
  RmsNorm norm{nullptr};
  at::Tensor token_weight;
};
TORCH_MODULE(BaseModel);

struct LlamaLm final : HfCausalLm {
  LlamaLm(ParamMaker& make, const HfModelConfig& c) : inv_freq(inverse_frequencies(c)), sliding_window(c.sliding_window) {
    model = register_module("model", BaseModel(make, c));
    lm_head = LmHead(*this, make, c, model->token_weight);
  }
  at::Tensor forward(const at::Tensor& ids) override {
    const int64_t t = ids.size(1);
    auto x = model->embed_tokens(ids);
    // LlamaRotaryEmbedding: positions x inverse frequencies in fp32, cos and sin in x's dtype.
    const at::Tensor positions = at::arange(t, ids.options().dtype(at::kLong)).to(at::kFloat);
    const at::Tensor freqs = positions.unsqueeze(-1) * inv_freq.to(x.device());
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    const at::Tensor cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
    at::Tensor mask;   // undefined: causal
    if (sliding_window && t > *sliding_window) {
      // Mistral: query i sees keys i - window + 1 .. i (transformers' sliding_window_overlay).
      const at::Tensor i = at::arange(t, ids.options().dtype(at::kLong)).unsqueeze(1);
      const at::Tensor j = at::arange(t, ids.options().dtype(at::kLong)).unsqueeze(0);
      mask = at::logical_and(j <= i, j > i - *sliding_window);
    }
    for (auto& layer : model->units) {
      x = checkpointer ? (*checkpointer)([layer, cos, sin, mask](const at::Tensor& in) mutable {
            return layer(in, cos, sin, mask);
          }, x)
                       : layer(x, cos, sin, mask);
    }
    x = model->norm(x);
    return lm_head(x);
  }
  BaseModel model{nullptr};
  LmHead lm_head;
  at::Tensor inv_freq;   // fp32 [head_dim / 2]; not a parameter nor a saved buffer (transformers' is not persistent)
  std::optional<int64_t> sliding_window;
};

std::shared_ptr<HfCausalLm> build(const HfModelConfig& config, ParamMaker& make) {
  return std::make_shared<LlamaLm>(make, config);
}

void read_config(const ConfigFields& f, HfModelConfig& c) {
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
    const ConfigFields p = f.nested("rope_parameters");
    c.rope_theta = p.number("rope_theta", c.rope_theta);
    c.rope_scaling = read_rope_scaling(p);
  } else {
    c.rope_theta = f.number("rope_theta", 10000.0);
    if (f.has("rope_scaling")) c.rope_scaling = read_rope_scaling(f.nested("rope_scaling"));
  }
  if (!(c.rope_theta > 0)) f.fail("rope_theta", detail::str("must be above 0, got ", c.rope_theta));
  if (c.model_type == "mistral" && f.has("sliding_window")) c.sliding_window = f.integer("sliding_window", std::nullopt);
}

// LlamaForCausalLM (and Mistral's, Qwen2's): model.{embed_tokens, layers.N, norm}, lm_head.
// A layer registers self_attn, mlp, then its two norms, as transformers' does.
std::vector<HfParam> params(const HfModelConfig& c) {
  std::vector<HfParam> out;
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
  return out;
}

// RMSNorm computed in fp32; the SwiGLU MLP keeps gate, silu(gate), up and the product.
estimate::DecoderDims decoder_dims(const HfModelConfig& c, int64_t block) {
  estimate::DecoderDims d = decoder_dims_of(c, block);
  d.norm = estimate::DecoderDims::Norm::kRmsNorm;
  d.mlp_saved = 4;
  return d;
}

}  // namespace

extern const FamilyDescriptor kLlamaFamily;   // the table's row (families.cpp)
const FamilyDescriptor kLlamaFamily{
    .name = "llama",
    .model_types = {"llama", "mistral", "qwen2"},
    .max_positions_key = "max_position_embeddings",
    .base_model_prefix = "model.",
    .ignorable_suffixes = {},
    .read_config = read_config,
    .params = params,
    .decoder_dims = decoder_dims,
    .build = build,
};

}  // namespace zerotrain::models::hf
