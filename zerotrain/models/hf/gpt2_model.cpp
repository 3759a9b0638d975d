// GPT-2 as transformers' GPT2LMHeadModel computes it in eval mode (no dropout): learned
// positions, pre-norm blocks with LayerNorm, fused qkv and GELU MLP in Conv1D layers (weights
// stored [in, out], applied as addmm(bias, x, weight) as transformers does, so the file's
// bytes are the parameter's), the head tied to wte unless the config unties it.
#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <vector>

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

// The activation config.json names (hf_config refuses the others).
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

}  // namespace

std::shared_ptr<HfCausalLm> build_gpt2(const HfModelConfig& config, ParamMaker& make) {
  return std::make_shared<Gpt2LmHead>(make, config);
}

}  // namespace zerotrain::models::hf
