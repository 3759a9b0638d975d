#include "zerotrain/models/models.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/stages/stage3/sharded.h"
#include "zerotrain/stages/stage3/units.h"

namespace zerotrain::models {
namespace {

using Fields = std::map<std::string, int64_t>;

// Bounds on a field, far above any model people train (GPT-3: 96 layers, n_embd 12288) and
// low enough that every product the parameter count forms fits in 64 bits (n_layer * 12 *
// n_embd^2 < 2^62): a field of 2^63-1 once ran the shape count for hours.
constexpr int64_t kMaxLayers = int64_t{1} << 14;
constexpr int64_t kMaxWidth = int64_t{1} << 22;

// Presets, then the user's overrides; unknown keys are errors with a suggestion.
Fields parse_config(const std::string& model, const std::string& text, const std::map<std::string, Fields>& presets) {
  std::string preset = "tiny";
  std::vector<std::pair<std::string, std::string>> overrides;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    ZT_CHECK(eq != std::string::npos, UsageError, "--model_config '", item, "': write key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "preset") {
      preset = value;
    } else {
      overrides.emplace_back(key, value);
    }
  }
  auto it = presets.find(preset);
  if (it == presets.end()) {
    std::vector<std::string> names;
    for (const auto& [name, fields] : presets) names.push_back(name);
    throw UsageError(detail::str("--model_config preset=", preset, ": ", model, " has the presets ", strings::join_words(names)));
  }
  Fields fields = it->second;
  for (const auto& [key, value] : overrides) {
    if (!fields.count(key)) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : fields) keys.push_back(k);
      const auto near = strings::closest_match(key, keys);
      throw UsageError(detail::str("--model_config: ", model, " has no field '", key, "'",
                                   near ? "; did you mean " + *near + "?" : "", " (fields: ", strings::join_words(keys), ")"));
    }
    const int64_t most = key == "n_layer" ? kMaxLayers : kMaxWidth;
    try {
      size_t used = 0;
      fields[key] = std::stoll(value, &used);
      ZT_CHECK(used == value.size() && fields[key] > 0 && fields[key] <= most, UsageError, "");
    } catch (const std::exception&) {
      throw UsageError(detail::str("--model_config ", key, "=", value, ": give a positive integer, at most ", most));
    }
  }
  return fields;
}

// --- MLP: regression on a teacher's outputs --------------------------------------------

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(const Fields& f) {
    int64_t width = f.at("n_in");
    for (int64_t i = 0; i < f.at("n_layer"); ++i) {
      layers->push_back(torch::nn::Linear(width, f.at("n_hidden")));
      layers->push_back(torch::nn::Tanh());
      width = f.at("n_hidden");
    }
    layers->push_back(torch::nn::Linear(width, f.at("n_out")));
    // Each Linear a ZeRO-3 unit (a pass-through at stages 0-2).
    layers = zerotrain::wrap_sequential(layers);
    register_module("layers", layers);
  }
  torch::nn::Sequential layers;
};

class Mlp final : public Model {
 public:
  // build false: only describe() works (for the estimator, which needs no weights).
  explicit Mlp(Fields f, bool build = true)
      : fields_(std::move(f)), module_(build ? std::make_shared<MlpImpl>(fields_) : nullptr) {}
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    // Inputs in the parameters' dtype (the engine may train in bf16/fp16); the loss in fp32.
    const auto dtype = module_->parameters().front().scalar_type();
    return torch::mse_loss(module_->layers->forward(inputs.to(dtype)).to(torch::kFloat), targets);
  }
  std::string describe() const override {
    return detail::str("mlp (", fields_.at("n_in"), " -> ", fields_.at("n_layer"), " x ", fields_.at("n_hidden"),
                       " -> ", fields_.at("n_out"), ")");
  }
  std::pair<int64_t, int64_t> data_dims() const override { return {fields_.at("n_in"), fields_.at("n_out")}; }
  std::string kind() const override { return "mlp"; }
  const Fields& fields() const override { return fields_; }

 private:
  Fields fields_;
  std::shared_ptr<MlpImpl> module_;
};

// --- GPT: decoder-only transformer ------------------------------------------------------

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
    auto mask = torch::ones({t, t}, torch::kBool).triu(1);
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
    auto positions = torch::arange(tokens.size(1), torch::kLong);
    auto x = wte(tokens) + wpe(positions);
    for (auto& block : block_units) x = block(x);
    return head(ln_f(x));
  }
  zerotrain::Sharded<torch::nn::Embedding> wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::ModuleList blocks;
  std::vector<zerotrain::Sharded<Block>> block_units;   // the modules in `blocks`
  torch::nn::LayerNorm ln_f{nullptr};
  zerotrain::Sharded<TiedHead> head{nullptr};
};

class Gpt final : public Model {
 public:
  explicit Gpt(Fields f, bool build = true)
      : fields_(std::move(f)), module_(build ? std::make_shared<GptImpl>(fields_) : nullptr) {}
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    auto logits = module_->forward(inputs);
    // The loss in fp32 whatever the dtype the model trains in (bf16/fp16 logits lose the
    // small probabilities cross-entropy needs).
    return torch::cross_entropy_loss(logits.view({-1, logits.size(-1)}).to(torch::kFloat), targets.view({-1}));
  }
  std::string describe() const override {
    return detail::str("gpt (n_layer ", fields_.at("n_layer"), ", n_head ", fields_.at("n_head"), ", n_embd ",
                       fields_.at("n_embd"), ", vocab_size ", fields_.at("vocab_size"), ", block_size ",
                       fields_.at("block_size"), ")");
  }
  std::pair<int64_t, int64_t> data_dims() const override { return {fields_.at("vocab_size"), fields_.at("block_size")}; }
  std::string kind() const override { return "gpt"; }
  const Fields& fields() const override { return fields_; }

 private:
  Fields fields_;
  std::shared_ptr<GptImpl> module_;
};

const std::map<std::string, Fields> kMlpPresets = {
    {"tiny", {{"n_in", 32}, {"n_hidden", 64}, {"n_layer", 2}, {"n_out", 8}}},
    {"small", {{"n_in", 256}, {"n_hidden", 1024}, {"n_layer", 4}, {"n_out", 64}}},
};
const std::map<std::string, Fields> kGptPresets = {
    {"tiny", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 64}, {"vocab_size", 128}, {"block_size", 32}}},
    {"small", {{"n_layer", 4}, {"n_head", 4}, {"n_embd", 256}, {"vocab_size", 1024}, {"block_size", 128}}},
    {"gpt2", {{"n_layer", 12}, {"n_head", 12}, {"n_embd", 768}, {"vocab_size", 50257}, {"block_size", 1024}}},
};

}  // namespace

estimate::ModelShape shape_of(torch::nn::Module& module, std::string name) {
  estimate::ModelShape shape;
  shape.name = std::move(name);
  std::set<const void*> seen;
  // ZeRO-3's units, before persistence (the estimate applies the config's threshold).
  const auto units = stages::stage3::find_units(module, {.param_threshold = -1});
  for (const auto& p : module.parameters()) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (p.requires_grad()) {
      shape.param_numels.push_back(p.numel());
      shape.param_units.push_back(units.owner_of(p.unsafeGetTensorImpl()));
    } else {
      shape.frozen_params += p.numel();   // DeepSpeed's count includes them
    }
  }
  auto own_params = [](const torch::nn::Module& m) {
    int64_t own = 0;
    for (const auto& p : m.parameters(/*recurse=*/false)) own += p.numel();
    return own;
  };
  // The module itself, then its descendants (modules(include_self) needs a shared_ptr).
  shape.largest_layer_params = own_params(module);
  for (const auto& m : module.modules(/*include_self=*/false)) {
    shape.largest_layer_params = std::max(shape.largest_layer_params, own_params(*m));
  }
  return shape;
}

estimate::ModelShape shape_of(Model& model) {
  estimate::ModelShape shape = shape_of(*model.module(), model.describe());
  const auto& f = model.fields();
  if (model.kind() == "gpt") {
    shape.gpt = estimate::GptDims{f.at("n_layer"), f.at("n_head"), f.at("n_embd"), f.at("vocab_size"), f.at("block_size")};
  } else {
    shape.mlp = estimate::MlpDims{f.at("n_in"), f.at("n_hidden"), f.at("n_layer"), f.at("n_out")};
  }
  return shape;
}

estimate::ModelShape shape_of(const std::string& name, const std::string& config) {
  // The parameters in the order the modules above register them.
  estimate::ModelShape shape;
  std::vector<int64_t>& n = shape.param_numels;
  if (name == "gpt") {
    const Fields f = parse_config(name, config, kGptPresets);
    const int64_t c = f.at("n_embd"), v = f.at("vocab_size"), t = f.at("block_size");
    ZT_CHECK(c % f.at("n_head") == 0, UsageError, "--model_config: n_embd (", c, ") must be a multiple of n_head (",
             f.at("n_head"), ")");
    // ZeRO-3 units as GptImpl makes them: wte 1, the blocks 2.., the head (owning nothing).
    n = {v * c, t * c};
    shape.param_units = {1, 0};
    for (int64_t layer = 0; layer < f.at("n_layer"); ++layer) {
      for (int64_t numel : {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c}) {
        n.push_back(numel);
        shape.param_units.push_back(static_cast<int>(2 + layer));
      }
    }
    n.insert(n.end(), {c, c});   // ln_f; the head is the token embedding (tied)
    shape.param_units.insert(shape.param_units.end(), {0, 0});
    shape.largest_layer_params = std::max({v * c, t * c, 4 * c * c + 4 * c, 4 * c * c + c});
    shape.gpt = estimate::GptDims{f.at("n_layer"), f.at("n_head"), c, v, t};
    shape.name = Gpt(f, /*build=*/false).describe();
    return shape;
  }
  if (name == "mlp") {
    const Fields f = parse_config(name, config, kMlpPresets);
    int64_t width = f.at("n_in");
    for (int64_t i = 0; i < f.at("n_layer"); ++i) {
      n.insert(n.end(), {f.at("n_hidden") * width, f.at("n_hidden")});
      shape.param_units.insert(shape.param_units.end(), {static_cast<int>(i + 1), static_cast<int>(i + 1)});
      shape.largest_layer_params = std::max(shape.largest_layer_params, f.at("n_hidden") * width + f.at("n_hidden"));
      width = f.at("n_hidden");
    }
    n.insert(n.end(), {f.at("n_out") * width, f.at("n_out")});
    const int last = static_cast<int>(f.at("n_layer") + 1);
    shape.param_units.insert(shape.param_units.end(), {last, last});
    shape.largest_layer_params = std::max(shape.largest_layer_params, f.at("n_out") * width + f.at("n_out"));
    shape.mlp = estimate::MlpDims{f.at("n_in"), f.at("n_hidden"), f.at("n_layer"), f.at("n_out")};
    shape.name = Mlp(f, /*build=*/false).describe();
    return shape;
  }
  throw UsageError(detail::str("--model ", name, ": the built-in models are mlp and gpt"));
}

std::unique_ptr<Model> make_model(const std::string& name, const std::string& config) {
  if (name == "mlp") return std::make_unique<Mlp>(parse_config(name, config, kMlpPresets));
  if (name == "gpt") return std::make_unique<Gpt>(parse_config(name, config, kGptPresets));
  throw UsageError(detail::str("--model ", name, ": the built-in models are mlp and gpt"));
}

}  // namespace zerotrain::models
