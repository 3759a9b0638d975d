// The MLP: on synthetic data, regression on a random teacher's outputs (mean squared
// error); on an image dataset, a classifier of the flattened pixels (cross-entropy).
#include <torch/torch.h>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/builtin.h"
#include "zerotrain/models/losses.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models {
namespace {

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
  Mlp(Fields f, bool classify) : fields_(std::move(f)), classify_(classify), module_(std::make_shared<MlpImpl>(fields_)) {}
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    const auto out = forward(inputs);
    return classify_ ? torch::cross_entropy_loss(out, targets) : torch::mse_loss(out, targets);
  }
  EvalSums eval_sums(const at::Tensor& inputs, const at::Tensor& targets) override {
    const auto out = forward(inputs);
    if (classify_) return classification_sums(out, targets);
    return {torch::mse_loss(out, targets, at::Reduction::Sum).item<double>() / static_cast<double>(out.size(1)),
            out.size(0), 0};
  }
  EvalMetric eval_metric() const override { return classify_ ? EvalMetric::kAccuracy : EvalMetric::kNone; }
  std::string describe() const override {
    return detail::str("mlp (", fields_.at("n_in"), " -> ", fields_.at("n_layer"), " x ", fields_.at("n_hidden"),
                       " -> ", fields_.at("n_out"), ")");
  }
  std::pair<int64_t, int64_t> data_dims() const override { return {fields_.at("n_in"), fields_.at("n_out")}; }
  std::string kind() const override { return "mlp"; }
  const Fields& fields() const override { return fields_; }
  int64_t hidden_size() const override { return fields_.at("n_hidden"); }

 private:
  // Inputs in the parameters' dtype (the engine may train in bf16/fp16), flattened when
  // they are images; the outputs in fp32.
  at::Tensor forward(const at::Tensor& inputs) {
    const auto dtype = module_->parameters().front().scalar_type();
    return module_->layers->forward(inputs.flatten(1).to(dtype)).to(torch::kFloat);
  }
  Fields fields_;
  bool classify_;
  std::shared_ptr<MlpImpl> module_;
};

Fields from_data(const DataShape& data) {
  using Kind = DataShape::Kind;
  ZT_CHECK(data.kind != Kind::kText, UsageError, "--model mlp does not train on text (", data.name,
           "): use --model gpt, or an image dataset");
  if (data.kind == Kind::kSynthetic) return {};
  return {{"n_in", data.channels * data.height * data.width}, {"n_out", data.classes}};
}

estimate::ModelShape shape(const Fields& f, const DataShape&) {
  estimate::ModelShape s;
  int64_t width = f.at("n_in");
  for (int64_t i = 0; i < f.at("n_layer"); ++i) {
    s.param_numels.insert(s.param_numels.end(), {f.at("n_hidden") * width, f.at("n_hidden")});
    s.param_units.insert(s.param_units.end(), {static_cast<int>(i + 1), static_cast<int>(i + 1)});
    s.largest_layer_params = std::max(s.largest_layer_params, f.at("n_hidden") * width + f.at("n_hidden"));
    width = f.at("n_hidden");
  }
  s.param_numels.insert(s.param_numels.end(), {f.at("n_out") * width, f.at("n_out")});
  const int last = static_cast<int>(f.at("n_layer") + 1);
  s.param_units.insert(s.param_units.end(), {last, last});
  s.largest_layer_params = std::max(s.largest_layer_params, f.at("n_out") * width + f.at("n_out"));
  s.mlp = estimate::MlpDims{f.at("n_in"), f.at("n_hidden"), f.at("n_layer"), f.at("n_out")};
  s.name = detail::str("mlp (", f.at("n_in"), " -> ", f.at("n_layer"), " x ", f.at("n_hidden"), " -> ", f.at("n_out"),
                       ")");
  return s;
}

}  // namespace

const Builtin& mlp_builtin() {
  static const Builtin builtin{
      .presets = {{"tiny", {{"n_in", 32}, {"n_hidden", 64}, {"n_layer", 2}, {"n_out", 8}}},
                  {"small", {{"n_in", 256}, {"n_hidden", 1024}, {"n_layer", 4}, {"n_out", 64}}}},
      .default_preset = "tiny",
      .fields_from_data = from_data,
      .make = [](const Fields& f, const DataShape& data) -> std::unique_ptr<Model> {
        return std::make_unique<Mlp>(f, data.kind == DataShape::Kind::kImages);
      },
      .shape = shape,
      .hidden_size = [](const Fields& f) { return f.at("n_hidden"); },
  };
  return builtin;
}

}  // namespace zerotrain::models
