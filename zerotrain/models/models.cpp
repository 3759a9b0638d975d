// The registry of built-in models, and counting any module's parameters.
#include "zerotrain/models/models.h"

#include <torch/torch.h>

#include <optional>
#include <set>

#include "zerotrain/core/error.h"
#include "zerotrain/models/builtin.h"
#include "zerotrain/models/hf/hf_model.h"
#include "zerotrain/stages/stage3/units.h"

namespace zerotrain::models {
namespace {

const Builtin& builtin(const std::string& name) {
  if (name == "mlp") return mlp_builtin();
  if (name == "gpt") return gpt_builtin();
  if (name == "convnet") return convnet_builtin();
  throw UsageError(detail::str("--model ", name, ": the built-in models are convnet, gpt and mlp; hf:DIR fine-tunes a Hugging Face model folder"));
}

// --model hf:DIR: a model built from a Hugging Face folder (models/hf/hf_model.h).
std::optional<std::string> hf_folder(const std::string& name) {
  if (name.rfind("hf:", 0) != 0) return std::nullopt;
  ZT_CHECK(name.size() > 3, UsageError, "--model hf: give the Hugging Face model folder: hf:DIR");
  return name.substr(3);
}

Fields fields_of(const Builtin& b, const std::string& name, const std::string& config, const DataShape& data) {
  return parse_fields(name, config, b.presets, b.default_preset, b.fields_from_data(data), data.name);
}

}  // namespace

std::unique_ptr<Model> make_model(const std::string& name, const std::string& config, const DataShape& data) {
  if (const auto dir = hf_folder(name)) return hf::make_hf_model(*dir, config, data);
  const Builtin& b = builtin(name);
  return b.make(fields_of(b, name, config, data), data);
}

estimate::ModelShape shape_of(const std::string& name, const std::string& config, const DataShape& data) {
  if (const auto dir = hf_folder(name)) return hf::hf_shape_of(*dir, config, data);
  const Builtin& b = builtin(name);
  return b.shape(fields_of(b, name, config, data), data);
}

int64_t hidden_size_of(const std::string& name, const std::string& config, const DataShape& data) {
  if (const auto dir = hf_folder(name)) return hf::hf_hidden_size_of(*dir);
  const Builtin& b = builtin(name);
  return b.hidden_size(fields_of(b, name, config, data));
}

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
  } else if (model.kind() == "mlp") {
    shape.mlp = estimate::MlpDims{f.at("n_in"), f.at("n_hidden"), f.at("n_layer"), f.at("n_out")};
  }
  return shape;
}

}  // namespace zerotrain::models
