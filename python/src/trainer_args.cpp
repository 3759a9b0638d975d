// HF's "auto" values for the Python Trainer (zerotrain.hf): the C++ Trainer's resolution
// (config/resolve.h), so that `zerotrain train`, the C++ Trainer and zerotrain.hf.Trainer
// fill and check a ds_config the same way.
#include "bindings.h"

#include "zerotrain/config/config.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/error.h"

namespace zerotrain::python {
namespace {

config::TrainerArgs trainer_args(const py::dict& d) {
  config::TrainerArgs a;
  auto take = [&](const char* key, auto& field) {
    if (!d.contains(key)) return;
    const py::handle v = d[key];
    if (v.is_none()) return;
    field = v.cast<std::remove_reference_t<decltype(field)>>();
  };
  take("world_size", a.world_size);
  take("per_device_train_batch_size", a.per_device_train_batch_size);
  take("gradient_accumulation_steps", a.gradient_accumulation_steps);
  take("max_grad_norm", a.max_grad_norm);
  take("learning_rate", a.learning_rate);
  take("adam_beta1", a.adam_beta1);
  take("adam_beta2", a.adam_beta2);
  take("adam_epsilon", a.adam_epsilon);
  take("weight_decay", a.weight_decay);
  take("fp16", a.fp16);
  take("bf16", a.bf16);
  take("warmup_steps", a.warmup_steps);
  take("warmup_ratio", a.warmup_ratio);
  take("seed", a.seed);
  if (d.contains("num_training_steps") && !d["num_training_steps"].is_none()) {
    a.num_training_steps = d["num_training_steps"].cast<int64_t>();
  }
  if (d.contains("hidden_size") && !d["hidden_size"].is_none()) a.hidden_size = d["hidden_size"].cast<int64_t>();
  return a;
}

// The value at a dotted path of the effective config ("optimizer.params.lr").
config::Json at_path(const config::Json& root, const std::string& path) {
  const config::Json* node = &root;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('.', begin), path.size());
    node = &node->at(path.substr(begin, end - begin));
    begin = end + 1;
  }
  return *node;
}

}  // namespace

void bind_trainer_args(py::module_& m) {
  m.def("resolve_auto", [](const std::string& json_text, const std::string& origin, const py::dict& args) {
    config::LoadOptions options;
    options.origin = origin;
    config::Config c = config::Config::from_string(json_text, options);
    config::resolve_auto(c, trainer_args(args));
    const config::Json effective = c.to_json();
    config::Json filled = config::Json::object();
    for (const auto& [path, source] : c.sources) {
      if (source == config::Source::kAuto) filled[path] = at_path(effective, path);
    }
    return json_to_python(filled.dump());
  }, py::arg("json_text"), py::arg("origin"), py::arg("trainer_args"),
  "HF's \"auto\" filling (transformers' HfTrainerDeepSpeedConfig): {canonical key path: value} for every key the "
  "Trainer arguments filled. ConfigError listing every mismatch between the config and the arguments.");
}

}  // namespace zerotrain::python
