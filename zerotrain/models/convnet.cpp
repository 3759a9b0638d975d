// The ConvNet of the DP/DDP/DeepSpeed comparisons: two 3x3 convolutions (no padding), each
// followed by ReLU and a 2x2 max-pool, then two linear layers. Its input channels, image
// size and classes come from the dataset (Fashion-MNIST: 1x28x28, 10 classes, 225,034
// parameters with the default widths).
#include <torch/torch.h>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/builtin.h"
#include "zerotrain/models/losses.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::models {
namespace {

// The side of the feature map after conv 3x3 (valid) then pool 2x2, twice.
int64_t pooled_side(int64_t side) { return ((side - 2) / 2 - 2) / 2; }

struct ConvNetImpl : torch::nn::Module {
  explicit ConvNetImpl(const Fields& f)
      : flat(f.at("conv2") * pooled_side(f.at("height")) * pooled_side(f.at("width"))) {
    // Each layer a ZeRO-3 unit (a pass-through at stages 0-2).
    conv1 = register_module("conv1", Sharded<torch::nn::Conv2d>(torch::nn::Conv2d(
                                         torch::nn::Conv2dOptions(f.at("in_channels"), f.at("conv1"), 3))));
    conv2 = register_module(
        "conv2", Sharded<torch::nn::Conv2d>(torch::nn::Conv2d(torch::nn::Conv2dOptions(f.at("conv1"), f.at("conv2"), 3))));
    fc1 = register_module("fc1", Sharded<torch::nn::Linear>(torch::nn::Linear(flat, f.at("n_hidden"))));
    fc2 = register_module("fc2", Sharded<torch::nn::Linear>(torch::nn::Linear(f.at("n_hidden"), f.at("n_classes"))));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2(h)), 2);
    return fc2(torch::relu(fc1(h.flatten(1))));
  }
  int64_t flat;
  Sharded<torch::nn::Conv2d> conv1{nullptr}, conv2{nullptr};
  Sharded<torch::nn::Linear> fc1{nullptr}, fc2{nullptr};
};

std::string describe_fields(const Fields& f) {
  return detail::str("convnet (", f.at("in_channels"), "x", f.at("height"), "x", f.at("width"), " -> conv ",
                     f.at("conv1"), ", conv ", f.at("conv2"), " -> ", f.at("n_hidden"), " -> ", f.at("n_classes"), ")");
}

class ConvNet final : public Model {
 public:
  explicit ConvNet(Fields f) : fields_(std::move(f)), module_(std::make_shared<ConvNetImpl>(fields_)) {}
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    return torch::cross_entropy_loss(logits(inputs), targets);
  }
  EvalSums eval_sums(const at::Tensor& inputs, const at::Tensor& targets) override {
    return classification_sums(logits(inputs), targets);
  }
  EvalMetric eval_metric() const override { return EvalMetric::kAccuracy; }
  std::string describe() const override { return describe_fields(fields_); }
  std::pair<int64_t, int64_t> data_dims() const override { return {0, 0}; }
  std::string kind() const override { return "convnet"; }
  const Fields& fields() const override { return fields_; }
  int64_t hidden_size() const override { return fields_.at("n_hidden"); }

 private:
  // Inputs in the parameters' dtype (the engine may train in bf16/fp16), logits in fp32.
  at::Tensor logits(const at::Tensor& inputs) {
    const auto dtype = module_->parameters().front().scalar_type();
    return module_->forward(inputs.to(dtype)).to(torch::kFloat);
  }
  Fields fields_;
  std::shared_ptr<ConvNetImpl> module_;
};

Fields from_data(const DataShape& data) {
  // No dataset (the estimator, advise): the preset's Fashion-MNIST shape.
  if (data.kind == DataShape::Kind::kSynthetic) return {};
  ZT_CHECK(data.kind == DataShape::Kind::kImages, UsageError, "--model convnet trains on images: give --dataset ",
           "fashion-mnist, cifar10:PATH or mnist:PATH (", data.name, " is not one)");
  ZT_CHECK(pooled_side(data.height) >= 1 && pooled_side(data.width) >= 1, UsageError, "--model convnet: ", data.name,
           "'s images are ", data.height, "x", data.width, "; two 3x3 convolutions and 2x2 pools need at least 10x10");
  return {{"in_channels", data.channels}, {"height", data.height}, {"width", data.width}, {"n_classes", data.classes}};
}

estimate::ModelShape shape(const Fields& f, const DataShape&) {
  estimate::ModelShape s;
  const int64_t c1 = f.at("conv1"), c2 = f.at("conv2"), hidden = f.at("n_hidden"), classes = f.at("n_classes");
  const int64_t flat = c2 * pooled_side(f.at("height")) * pooled_side(f.at("width"));
  s.param_numels = {c1 * f.at("in_channels") * 9, c1, c2 * c1 * 9, c2, hidden * flat, hidden, classes * hidden, classes};
  s.param_units = {1, 1, 2, 2, 3, 3, 4, 4};
  for (size_t i = 0; i < s.param_numels.size(); i += 2) {
    s.largest_layer_params = std::max(s.largest_layer_params, s.param_numels[i] + s.param_numels[i + 1]);
  }
  s.name = describe_fields(f);
  return s;
}

}  // namespace

const Builtin& convnet_builtin() {
  // The data fields are placeholders the dataset replaces; the widths are the comparison's.
  static const Builtin builtin{
      .presets = {{"small",
                   {{"in_channels", 1}, {"height", 28}, {"width", 28}, {"n_classes", 10}, {"conv1", 32}, {"conv2", 64},
                    {"n_hidden", 128}}},
                  {"tiny",
                   {{"in_channels", 1}, {"height", 28}, {"width", 28}, {"n_classes", 10}, {"conv1", 8}, {"conv2", 16},
                    {"n_hidden", 32}}}},
      .default_preset = "small",
      .fields_from_data = from_data,
      .make = [](const Fields& f, const DataShape&) -> std::unique_ptr<Model> { return std::make_unique<ConvNet>(f); },
      .shape = shape,
      .hidden_size = [](const Fields& f) { return f.at("n_hidden"); },
  };
  return builtin;
}

}  // namespace zerotrain::models
