// The GPT-2 family (model_type gpt2), all of it: its config.json fields, its parameters, what
// its blocks keep for backward, and the module, GPT-2 as transformers' GPT2LMHeadModel computes
// it in eval mode (no dropout): learned positions, pre-norm blocks with LayerNorm, fused qkv and
// GELU MLP in Conv1D layers (weights stored [in, out], applied as addmm(bias, x, weight) as
// transformers does, so the file's bytes are the parameter's), the head tied to wte unless the
// config unties it.
#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <set>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/models/hf/families.h"
#include "zerotrain/models/hf/hf_modules.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models::hf {
namespace {

// transformers' Conv1D: y = x W + b with W [in, out].
struct Conv1DImpl : torch::nn::Module {
  Conv1DImpl(ParamMaker& make, const std::string& name, int64_t in, int64_t out) {
    weight = register_parameter("weight", make.make(name + ".weight", {in, out}));
    bias = register_parameter("bias", make.make(name + ".bias", {out}));
  }
  at::Tensor forward(const at::Tensor& x) {
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(1);
    return at::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(sizes);
  }
  at::Tensor weight, bias;
};
TORCH_MODULE(Conv1D);

struct LayerNormImpl : torch::nn::Module {
  LayerNormImpl(ParamMaker& make, const std::string& name, int64_t dim, double eps) : eps(eps) {
    weight = register_parameter("weight", make.make(name + ".weight", {dim}));
    bias = register_parameter("bias", make.make(name + ".bias", {dim}));
  }
  at::Tensor forward(const at::Tensor& x) { return at::layer_norm(x, {weight.size(0)}, weight, bias, eps); }
  double eps;
  at::Tensor weight, bias;
};
TORCH_MODULE(LayerNorm);

// The activation config.json names (read_config below refuses the others).
at::Tensor activate(const at::Tensor& x, const std::string& name) {
  if (name == "gelu_new") {
    // transformers' NewGELUActivation, operation for operation (its rounding, not
    // at::gelu's tanh approximation, which rounds differently).
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * at::pow(x, 3.0))));
  }
  if (name == "gelu_pytorch_tanh") return at::gelu(x, "tanh");
  return at::gelu(x);
}

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c) : heads(c.num_heads) {
    c_attn = register_module("c_attn", Conv1D(make, p + "c_attn", c.hidden_size, 3 * c.hidden_size));
    c_proj = register_module("c_proj", Conv1D(make, p + "c_proj", c.hidden_size, c.hidden_size));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), e = x.size(2);
    auto qkv = c_attn(x).split(e, 2);
    auto heads_of = [&](const at::Tensor& y) { return y.view({b, t, heads, e / heads}).transpose(1, 2); };
    auto y = attention(heads_of(qkv[0]), heads_of(qkv[1]), heads_of(qkv[2]), {});
    return c_proj(y.transpose(1, 2).reshape({b, t, e}).contiguous());
  }
  int64_t heads;
  Conv1D c_attn{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c) : activation(c.activation) {
    c_fc = register_module("c_fc", Conv1D(make, p + "c_fc", c.hidden_size, c.intermediate_size));
    c_proj = register_module("c_proj", Conv1D(make, p + "c_proj", c.intermediate_size, c.hidden_size));
  }
  at::Tensor forward(const at::Tensor& x) { return c_proj(activate(c_fc(x), activation)); }
  std::string activation;
  Conv1D c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct BlockImpl : torch::nn::Module {
  BlockImpl(ParamMaker& make, const std::string& p, const HfModelConfig& c) {
    ln_1 = register_module("ln_1", LayerNorm(make, p + "ln_1", c.hidden_size, c.norm_eps));
    attn = register_module("attn", Attention(make, p + "attn.", c));
    ln_2 = register_module("ln_2", LayerNorm(make, p + "ln_2", c.hidden_size, c.norm_eps));
    mlp = register_module("mlp", Mlp(make, p + "mlp.", c));
  }
  at::Tensor forward(const at::Tensor& x) {
    auto h = attn(ln_1(x)) + x;
    return h + mlp(ln_2(h));
  }
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

// GPT2Model: wte and each block are ZeRO-3 units; wpe and ln_f stay with the model.
struct TransformerImpl : torch::nn::Module {
  TransformerImpl(ParamMaker& make, const HfModelConfig& c) {
    Embedding token(make, "transformer.wte", c.vocab_size, c.hidden_size);
    token_weight = token->weight;
    wte = register_module("wte", zerotrain::Sharded<Embedding>(token));
    wpe = register_module("wpe", Embedding(make, "transformer.wpe", c.max_positions, c.hidden_size));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      blocks.emplace_back(Block(make, "transformer.h." + std::to_string(i) + ".", c));
      h->push_back(blocks.back());
    }
    register_module("h", h);
    ln_f = register_module("ln_f", LayerNorm(make, "transformer.ln_f", c.hidden_size, c.norm_eps));
  }
  zerotrain::Sharded<Embedding> wte{nullptr};
  Embedding wpe{nullptr};
  torch::nn::ModuleList h;
  std::vector<zerotrain::Sharded<Block>> blocks;   // the modules in `h`
  LayerNorm ln_f{nullptr};
  at::Tensor token_weight;   // wte's weight, for the tied head
};
TORCH_MODULE(Transformer);

struct Gpt2LmHead final : HfCausalLm {
  Gpt2LmHead(ParamMaker& make, const HfModelConfig& c) {
    transformer = register_module("transformer", Transformer(make, c));
    lm_head = LmHead(*this, make, c, transformer->token_weight);
  }
  at::Tensor forward(const at::Tensor& ids) override {
    auto positions = at::arange(ids.size(1), ids.options().dtype(at::kLong));
    auto x = transformer->wte(ids) + transformer->wpe(positions);
    for (auto& block : transformer->blocks) {
      x = checkpointer ? (*checkpointer)([block](const at::Tensor& in) mutable { return block(in); }, x) : block(x);
    }
    x = transformer->ln_f(x);
    return lm_head(x);
  }
  Transformer transformer{nullptr};
  LmHead lm_head;
};

std::shared_ptr<HfCausalLm> build(const HfModelConfig& config, ParamMaker& make) {
  return std::make_shared<Gpt2LmHead>(make, config);
}

void read_config(const ConfigFields& f, HfModelConfig& c) {
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

// GPT2LMHeadModel: transformer.{wte, wpe, h.N, ln_f}, lm_head. Units: wte 1, block i 2 + i,
// the head L + 2 (it owns a parameter only when untied).
std::vector<HfParam> params(const HfModelConfig& c) {
  std::vector<HfParam> out;
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
  return out;
}

// Not the built-in GPT's dimensions: this module attends through the fused kernel and
// computes gelu_new op by op, which keep other tensors. activate(): gelu_new keeps its input,
// 0.5 x, the tanh, 1 + tanh and their product; at::gelu its input and output.
estimate::DecoderDims decoder_dims(const HfModelConfig& c, int64_t block) {
  estimate::DecoderDims d = decoder_dims_of(c, block);
  d.norm = estimate::DecoderDims::Norm::kLayerNorm;
  d.mlp_saved = c.activation == "gelu_new" ? 5 : 2;
  return d;
}

}  // namespace

extern const FamilyDescriptor kGpt2Family;   // the table's row (families.cpp)
const FamilyDescriptor kGpt2Family{
    .name = "gpt2",
    .model_types = {"gpt2"},
    .max_positions_key = "n_positions",
    .base_model_prefix = "transformer.",
    .ignorable_suffixes = {".attn.bias", ".attn.masked_bias"},   // the causal masks older saves hold
    .read_config = read_config,
    .params = params,
    .decoder_dims = decoder_dims,
    .build = build,
};

}  // namespace zerotrain::models::hf
