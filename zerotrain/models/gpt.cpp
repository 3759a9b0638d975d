// The GPT: a decoder-only transformer (GPT-2's layout, pre-norm blocks, tied head),
// trained as a language model on synthetic sequences or byte-level text.
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>

#include "zerotrain/activation/checkpoint.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/builtin.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models {
namespace {

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t n_embd, int64_t n_head) : n_head(n_head) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    qkv = register_module("qkv", torch::nn::Linear(n_embd, 3 * n_embd));
    proj = register_module("proj", torch::nn::Linear(n_embd, n_embd));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd})));
    fc = register_module("fc", torch::nn::Linear(n_embd, 4 * n_embd));
    out = register_module("out", torch::nn::Linear(4 * n_embd, n_embd));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), hd = c / n_head;
    auto parts = qkv(ln1(x)).split(c, 2);
    auto q = parts[0].view({b, t, n_head, hd}).transpose(1, 2);
    auto k = parts[1].view({b, t, n_head, hd}).transpose(1, 2);
    auto v = parts[2].view({b, t, n_head, hd}).transpose(1, 2);
    auto att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    auto mask = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
    auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({b, t, c});
    auto h = x + proj(y);
    return h + out(torch::gelu(fc(ln2(h))));
  }
  int64_t n_head;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, out{nullptr};
};
TORCH_MODULE(Block);

// The output projection, its weight the token embedding's (GPT-2 ties them).
struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(torch::Tensor embedding) { weight = register_parameter("weight", std::move(embedding)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

// Each block, the token embedding and the head are ZeRO-3 units (pass-throughs at stages
// 0-2); the position embedding and the last layer norm stay with the model.
struct GptImpl : torch::nn::Module {
  explicit GptImpl(const Fields& f) {
    ZT_CHECK(f.at("n_embd") % f.at("n_head") == 0, UsageError, "--model_config: n_embd (", f.at("n_embd"),
             ") must be a multiple of n_head (", f.at("n_head"), ")");
    torch::nn::Embedding token_embedding(f.at("vocab_size"), f.at("n_embd"));
    torch::nn::Embedding position_embedding(f.at("block_size"), f.at("n_embd"));
    {
      // GPT-2's initialisation: with the head tied to it, N(0, 1) embeddings would start the
      // logits (and the loss) far too large. Before the unit is made: under ZeroInit that
      // cuts it.
      torch::NoGradGuard no_grad;
      token_embedding->weight.normal_(0.0, 0.02);
      position_embedding->weight.normal_(0.0, 0.02);
    }
    wte = register_module("wte", zerotrain::Sharded<torch::nn::Embedding>(token_embedding));
    wpe = register_module("wpe", position_embedding);
    for (int64_t i = 0; i < f.at("n_layer"); ++i) {
      block_units.emplace_back(Block(f.at("n_embd"), f.at("n_head")));
      blocks->push_back(block_units.back());
    }
    register_module("blocks", blocks);
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({f.at("n_embd")})));
    head = register_module("head", zerotrain::Sharded<TiedHead>(TiedHead(token_embedding->weight)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto positions = torch::arange(tokens.size(1), tokens.options().dtype(torch::kLong));
    auto x = wte(tokens) + wpe(positions);
    for (auto& block : block_units) {
      // Gradient checkpointing: each block keeps only its input and is run again in
      // backward, as HF's and Megatron's GPTs checkpoint each layer. The lambda holds the
      // block until that backward.
      x = checkpointer ? (*checkpointer)([block](const at::Tensor& in) mutable { return block(in); }, x) : block(x);
    }
    return head(ln_f(x));
  }
  zerotrain::Sharded<torch::nn::Embedding> wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks;
  std::vector<zerotrain::Sharded<Block>> block_units;   // the modules in `blocks`
  torch::nn::LayerNorm ln_f{nullptr};
  zerotrain::Sharded<TiedHead> head{nullptr};
  std::optional<activation::Checkpointer> checkpointer;   // set by --gradient_checkpointing
};

std::string describe_fields(const Fields& f) {
  return detail::str("gpt (n_layer ", f.at("n_layer"), ", n_head ", f.at("n_head"), ", n_embd ", f.at("n_embd"),
                     ", vocab_size ", f.at("vocab_size"), ", block_size ", f.at("block_size"), ")");
}

class Gpt final : public Model {
 public:
  explicit Gpt(Fields f) : fields_(std::move(f)), module_(std::make_shared<GptImpl>(fields_)) {}
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    return torch::cross_entropy_loss(flat_logits(inputs), targets.view({-1}));
  }
  EvalSums eval_sums(const at::Tensor& inputs, const at::Tensor& targets) override {
    const auto sum = torch::cross_entropy_loss(flat_logits(inputs), targets.view({-1}), {}, at::Reduction::Sum);
    return {sum.item<double>(), targets.numel(), 0};
  }
  EvalMetric eval_metric() const override { return EvalMetric::kPerplexity; }
  std::string describe() const override { return describe_fields(fields_); }
  std::pair<int64_t, int64_t> data_dims() const override { return {fields_.at("vocab_size"), fields_.at("block_size")}; }
  std::string kind() const override { return "gpt"; }
  const Fields& fields() const override { return fields_; }
  int64_t hidden_size() const override { return fields_.at("n_embd"); }
  void enable_gradient_checkpointing(const activation::CheckpointOptions& options) override {
    activation::CheckpointOptions o = options;
    // One segment per block: DeepSpeed's number_checkpoints is the layer count.
    if (!o.number_checkpoints) o.number_checkpoints = fields_.at("n_layer");
    module_->checkpointer.emplace(o);
  }

 private:
  // The logits in fp32 whatever the dtype the model trains in (bf16/fp16 logits lose the
  // small probabilities cross-entropy needs), one row per token.
  at::Tensor flat_logits(const at::Tensor& inputs) {
    auto logits = module_->forward(inputs);
    return logits.view({-1, logits.size(-1)}).to(torch::kFloat);
  }
  Fields fields_;
  std::shared_ptr<GptImpl> module_;
};

Fields from_data(const DataShape& data) {
  ZT_CHECK(data.kind != DataShape::Kind::kImages, UsageError, "--model gpt does not train on images (", data.name,
           "): use --model convnet or mlp, or a text dataset (text:PATH, kjv)");
  if (data.kind == DataShape::Kind::kText) return {{"vocab_size", data.vocab_size}};
  return {};
}

estimate::ModelShape shape(const Fields& f, const DataShape&) {
  estimate::ModelShape s;
  std::vector<int64_t>& n = s.param_numels;
  const int64_t c = f.at("n_embd"), v = f.at("vocab_size"), t = f.at("block_size");
  ZT_CHECK(c % f.at("n_head") == 0, UsageError, "--model_config: n_embd (", c, ") must be a multiple of n_head (",
           f.at("n_head"), ")");
  // ZeRO-3 units as GptImpl makes them: wte 1, the blocks 2.., the head (owning nothing).
  n = {v * c, t * c};
  s.param_units = {1, 0};
  for (int64_t layer = 0; layer < f.at("n_layer"); ++layer) {
    for (int64_t numel : {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c}) {
      n.push_back(numel);
      s.param_units.push_back(static_cast<int>(2 + layer));
    }
  }
  n.insert(n.end(), {c, c});   // ln_f; the head is the token embedding (tied)
  s.param_units.insert(s.param_units.end(), {0, 0});
  s.largest_layer_params = std::max({v * c, t * c, 4 * c * c + 4 * c, 4 * c * c + c});
  s.gpt = estimate::GptDims{f.at("n_layer"), f.at("n_head"), c, v, t};
  s.name = describe_fields(f);
  return s;
}

}  // namespace

const Builtin& gpt_builtin() {
  static const Builtin builtin{
      .presets = {{"tiny", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"vocab_size", 128}, {"block_size", 32}}},
                  {"small", {{"n_layer", 4}, {"n_head", 4}, {"n_embd", 256}, {"vocab_size", 1024}, {"block_size", 128}}},
                  {"gpt2",
                   {{"n_layer", 12}, {"n_head", 12}, {"n_embd", 768}, {"vocab_size", 50257}, {"block_size", 1024}}}},
      .default_preset = "tiny",
      .fields_from_data = from_data,
      .make = [](const Fields& f, const DataShape&) -> std::unique_ptr<Model> { return std::make_unique<Gpt>(f); },
      .shape = shape,
      .hidden_size = [](const Fields& f) { return f.at("n_embd"); },
  };
  return builtin;
}

}  // namespace zerotrain::models
