// zerotrain._C.Config: the one place where the Python package's ds_config is read (a file, a
// JSON text, or a dict converted value by value, never through Python's json module) and
// asked about (stage, precision, offload, batch sizes). python/zerotrain/config.py picks the
// source as DeepSpeed's initialize does; everything else is here.
#include <atomic>
#include <cmath>

#include "config_handle.h"
#include "json_convert.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/config/spelled_auto.h"
#include "zerotrain/core/error.h"

namespace zerotrain::python {
namespace {

// Configs read from the package's inputs in this process: a test checks that one
// initialize reads its config once.
std::atomic<int64_t> g_config_reads{0};

struct LoadRequest {
  std::string origin;
  // A client optimizer given to initialize, as the "optimizer" block it stands for (the
  // config's own block and a client optimizer together are an error, as in DeepSpeed).
  std::optional<config::Json> client_optimizer;
  bool client_scheduler = false;
};

ConfigPtr load(config::Json raw, const LoadRequest& request) {
  ++g_config_reads;
  ZT_CHECK(raw.is_object(), ConfigError, request.origin, ": the config must be a JSON object ({...})");
  if (request.client_optimizer) {
    ZT_CHECK(!raw.contains("optimizer"), ConfigError, request.origin, ": both the config's \"optimizer\" block and a "
             "client optimizer were given; keep one of them");
    raw["optimizer"] = *request.client_optimizer;
  }
  ZT_CHECK(!request.client_scheduler || !raw.contains("scheduler"), ConfigError, request.origin, ": both the "
           "config's \"scheduler\" block and a client lr_scheduler were given; keep one of them");
  config::LoadOptions options;
  options.origin = request.origin;
  auto handle = std::make_shared<ConfigHandle>();
  handle->config = config::Config::from_json(raw, options);
  handle->raw = std::move(raw);
  handle->origin = request.origin;
  return handle;
}

LoadRequest request_of(std::string origin, const py::object& client_optimizer, bool client_scheduler) {
  LoadRequest r;
  r.origin = std::move(origin);
  if (!client_optimizer.is_none()) r.client_optimizer = to_json(client_optimizer, "the client optimizer's block");
  r.client_scheduler = client_scheduler;
  return r;
}

const char* precision_of(const config::Config& c) {
  if (c.bf16_enabled()) return "bf16";
  if (c.fp16_enabled()) return "fp16";
  return "fp32";
}

// A pending "auto" in fp16.enabled or bf16.enabled with neither on: the Trainer decides.
bool precision_pending(const config::Config& c) {
  return !c.bf16_enabled() && !c.fp16_enabled() &&
         (c.source_of("fp16.enabled") == config::Source::kAutoPending ||
          c.source_of("bf16.enabled") == config::Source::kAutoPending);
}

std::string device_name(const std::optional<config::OffloadDevice>& d) {
  return config::enum_name(d.value_or(config::OffloadDevice::kNone));
}

config::TrainerArgs trainer_args(const py::dict& d) {
  config::TrainerArgs a;
  auto take = [&](const char* key, auto& field) {
    if (!d.contains(key) || d[key].is_none()) return;
    field = d[key].cast<std::remove_reference_t<decltype(field)>>();
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

}  // namespace

void bind_config(py::module_& m) {
  py::class_<ConfigHandle, std::shared_ptr<ConfigHandle>>(m, "Config",
      "A ds_config read and checked by the engine's reader. Make one with zerotrain.config.load.")
      .def_static("from_file", [](const std::string& path, const py::object& client_optimizer, bool client_scheduler) {
        return load(config::read_json_file(path), request_of(path, client_optimizer, client_scheduler));
      }, py::arg("path"), py::arg("client_optimizer") = py::none(), py::arg("client_scheduler") = false)
      .def_static("from_text", [](const std::string& text, const std::string& origin,
                                  const py::object& client_optimizer, bool client_scheduler) {
        return load(config::parse_json_text(text, origin), request_of(origin, client_optimizer, client_scheduler));
      }, py::arg("text"), py::arg("origin"), py::arg("client_optimizer") = py::none(),
      py::arg("client_scheduler") = false)
      .def_static("from_dict", [](const py::dict& d, const std::string& origin, const py::object& client_optimizer,
                                  bool client_scheduler) {
        return load(to_json(d, "the config dict"), request_of(origin, client_optimizer, client_scheduler));
      }, py::arg("config"), py::arg("origin") = "<config dict>", py::arg("client_optimizer") = py::none(),
      py::arg("client_scheduler") = false)
      // Pickled as the JSON it was read from (HF's Trainer saves its TrainingArguments with
      // torch.save, and they hold the config): unpickling reads it again.
      .def(py::pickle([](const ConfigHandle& h) { return py::make_tuple(to_python(h.raw), h.origin); },
                      [](const py::tuple& state) {
                        ZT_CHECK(state.size() == 2, UsageError, "a pickled zerotrain config holds (config, origin)");
                        LoadRequest request;
                        request.origin = state[1].cast<std::string>();
                        return load(to_json(state[0], "a pickled config"), request);
                      }))
      .def_property_readonly("origin", [](const ConfigHandle& h) { return h.origin; })
      .def_property_readonly("stage",
                             [](const ConfigHandle& h) { return static_cast<int>(h.config.zero_optimization.stage); })
      .def_property_readonly("precision", [](const ConfigHandle& h) -> py::object {
        if (precision_pending(h.config)) return py::none();
        return py::str(precision_of(h.config));
      }, "\"fp32\", \"bf16\" or \"fp16\"; None while fp16/bf16 \"enabled\" is a pending \"auto\" and neither is on")
      .def_property_readonly("dtype", [](const ConfigHandle& h) {
        return h.config.bf16_enabled() ? at::kBFloat16 : h.config.fp16_enabled() ? at::kHalf : at::kFloat;
      }, "The training dtype, as a torch.dtype (float32 while the precision is pending)")
      .def_property_readonly("fp16_enabled", [](const ConfigHandle& h) { return h.config.fp16_enabled(); })
      .def_property_readonly("bf16_enabled", [](const ConfigHandle& h) { return h.config.bf16_enabled(); })
      .def_property_readonly("fp16_auto_cast", [](const ConfigHandle& h) { return h.config.fp16.auto_cast; })
      .def_property_readonly("offload_optimizer_device", [](const ConfigHandle& h) {
        const auto& b = h.config.zero_optimization.offload_optimizer;
        return device_name(b ? std::optional(b->device) : std::nullopt);
      })
      .def_property_readonly("offload_param_device", [](const ConfigHandle& h) {
        const auto& b = h.config.zero_optimization.offload_param;
        return device_name(b ? std::optional(b->device) : std::nullopt);
      })
      .def_property_readonly("offload", [](const ConfigHandle& h) {
        const auto& z = h.config.zero_optimization;
        return (z.offload_optimizer && z.offload_optimizer->enabled()) ||
               (z.offload_param && z.offload_param->enabled());
      }, "Whether the optimizer states or the parameters live on the CPU or an NVMe disk")
      .def_property_readonly("comm_backend", [](const ConfigHandle& h) {
        return comm::to_string(comm::apply_env(comm::options_from_config(h.config)).backend);
      }, "The backend the engine's own group would use: the config's \"comm\" block under ZEROTRAIN_COMM_BACKEND")
      .def_property_readonly("train_batch_size", [](const ConfigHandle& h) { return h.config.train_batch_size.value; })
      .def_property_readonly("train_micro_batch_size_per_gpu",
                             [](const ConfigHandle& h) { return h.config.train_micro_batch_size_per_gpu.value; })
      .def_property_readonly("gradient_accumulation_steps",
                             [](const ConfigHandle& h) { return h.config.gradient_accumulation_steps.value; })
      .def_property_readonly("gradient_clipping",
                             [](const ConfigHandle& h) { return h.config.gradient_clipping.value; })
      .def_property_readonly("steps_per_print", [](const ConfigHandle& h) { return h.config.steps_per_print; })
      .def_property_readonly("wall_clock_breakdown",
                             [](const ConfigHandle& h) { return h.config.wall_clock_breakdown; })
      .def_property_readonly("gather_16bit_weights_on_model_save", [](const ConfigHandle& h) {
        return h.config.zero_optimization.gather_16bit_weights_on_model_save;
      })
      .def_property_readonly("has_optimizer", [](const ConfigHandle& h) { return h.config.optimizer.has_value(); })
      .def_property_readonly("has_scheduler", [](const ConfigHandle& h) { return h.config.scheduler.has_value(); })
      .def_property_readonly("unresolved_auto_keys",
                             [](const ConfigHandle& h) { return h.config.unresolved_auto_keys(); })
      .def("raw", [](const ConfigHandle& h) { return to_python(h.raw); },
           "A new dict of the config as given (with the \"auto\" values a resolution filled)")
      .def("effective", [](const ConfigHandle& h) { return to_python(h.config.to_json()); },
           "A new dict of every key's effective value, defaults included")
      .def("resolve_auto", [](const ConfigHandle& h, const py::dict& args, bool model_known) {
        auto resolved = std::make_shared<ConfigHandle>(h);
        const config::TrainerArgs a = trainer_args(args);
        config::resolve_auto(resolved->config, a);
        if (model_known && !a.hidden_size) {
          for (const std::string& key : resolved->config.unresolved_auto_keys()) {
            ZT_CHECK(key.rfind("zero_optimization.", 0) != 0, ConfigError, h.origin, ": ", key, " is \"auto\", "
                     "but the model's config has no hidden_size (nor hidden_sizes, nor a text_config with one) to fill "
                     "it from; give it a value in the ds_config");
          }
        }
        resolved->raw = config::with_filled_auto(resolved->config, h.raw);
        return resolved;
      }, py::arg("trainer_args"), py::arg("model_known") = false,
      "A new Config with HF's \"auto\" values filled from TrainingArguments (transformers' HfTrainerDeepSpeedConfig); "
      "ConfigError listing every mismatch between the config and the arguments. `model_known`: the model was given, "
      "so a bucket size left \"auto\" for want of its hidden_size is an error.");
  m.def("_config_reads", [] { return g_config_reads.load(); }, "How many configs the package has read (tests).");
}

}  // namespace zerotrain::python
