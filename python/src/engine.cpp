// initialize, the Engine and GatheredParameters for Python (python/zerotrain/runtime/engine.py
// wraps them in DeepSpeed's names). Every call that can wait on other ranks or on a disk
// releases the GIL.
#include <optional>

#include "bindings.h"
#include "config_handle.h"
#include "json_convert.h"
#include "group.h"
#include "mirror.h"
#include "zerotrain/config/effective.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/json_reader.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::python {
namespace {

// Engine::NoSync and GatheredParameters are scopes that cannot move; these hold one each
// for a Python context manager.
struct NoSyncScope {
  explicit NoSyncScope(Engine& engine) : scope(engine.no_sync()) {}
  Engine::NoSync scope;
};
struct GatherScope {
  GatherScope(Engine& engine, std::vector<at::Tensor> params, std::optional<int> modifier_rank)
      : scope(engine, std::move(params), modifier_rank) {}
  GatheredParameters scope;
};

// The engine together with the mirror it trains (the mirror must outlive it).
struct PyEngine {
  std::shared_ptr<Mirror> model;
  std::optional<Engine> engine;
  Engine& get() {
    ZT_CHECK(engine.has_value(), UsageError, "this engine was closed (engine.destroy()); initialize a new one");
    return *engine;
  }
};

py::dict state_bytes(const ModelStateBytes& b) {
  py::dict d;
  d["params"] = b.params;
  d["grads"] = b.grads;
  d["optimizer"] = b.optimizer;
  d["master"] = b.master;
  d["buffers"] = b.buffers;
  d["gathered_peak"] = b.gathered_peak;
  d["disk"] = b.disk;
  d["total"] = b.total();
  return d;
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<NoSyncScope>(m, "NoSyncScope");
  py::class_<GatherScope>(m, "GatherScope").def("close", [](GatherScope& s) {
    py::gil_scoped_release no_gil;
    s.scope.close();
  });

  py::class_<PyEngine, std::shared_ptr<PyEngine>>(m, "Engine")
      .def("backward", [](PyEngine& e, const at::Tensor& loss, bool scale_wrt_gas) {
        py::gil_scoped_release no_gil;   // autograd calls back into Python (checkpointing, hooks) on its own
        e.get().backward(loss, scale_wrt_gas);
      }, py::arg("loss"), py::arg("scale_wrt_gas") = true)
      .def("step", [](PyEngine& e) {
        py::gil_scoped_release no_gil;
        e.get().step();
      })
      .def("is_gradient_accumulation_boundary", [](PyEngine& e) { return e.get().is_gradient_accumulation_boundary(); })
      .def("set_gradient_accumulation_boundary", [](PyEngine& e, std::optional<bool> is_boundary) {
        e.get().set_gradient_accumulation_boundary(is_boundary);
      })
      .def("zero_grad", [](PyEngine& e) { e.get().zero_grad(); })
      .def("get_lr", [](PyEngine& e) { return e.get().get_lr(); })
      .def("set_lr", [](PyEngine& e, const std::vector<double>& lrs) { e.get().set_lr(lrs); })
      .def("global_steps", [](PyEngine& e) { return e.get().global_steps(); })
      .def("global_samples", [](PyEngine& e) { return e.get().global_samples(); })
      .def("skipped_steps", [](PyEngine& e) { return e.get().skipped_steps(); })
      .def("micro_steps", [](PyEngine& e) { return e.get().micro_steps(); })
      .def("loss_scale", [](PyEngine& e) { return e.get().loss_scale(); })
      .def("get_global_grad_norm", [](PyEngine& e) { return e.get().get_global_grad_norm(); })
      .def("model_dtype", [](PyEngine& e) { return e.get().model_dtype(); })   // a torch.dtype
      .def("device", [](PyEngine& e) { return e.get().device().str(); })
      .def("rank", [](PyEngine& e) { return e.get().comm().rank(); })
      .def("world_size", [](PyEngine& e) { return e.get().comm().world_size(); })
      .def("backend", [](PyEngine& e) { return comm::to_string(e.get().comm().backend()); })
      .def("config", [](PyEngine& e) {
        // The config the engine runs: the batch triangle resolved at the job's world size.
        auto handle = std::make_shared<ConfigHandle>();
        handle->config = e.get().config();
        handle->origin = "<the engine's config>";
        handle->raw = handle->config.to_json();
        return handle;
      })
      .def("effective_config_table", [](PyEngine& e) { return config::effective_table(e.get().config()); })
      .def("model_state_bytes", [](PyEngine& e) { return state_bytes(e.get().model_state_bytes()); })
      .def("no_sync", [](PyEngine& e) { return std::make_unique<NoSyncScope>(e.get()); })
      .def("gathered_parameters",
           [](PyEngine& e, std::vector<at::Tensor> params, std::optional<int> modifier_rank) {
             py::gil_scoped_release no_gil;
             return std::make_unique<GatherScope>(e.get(), std::move(params), modifier_rank);
           })
      .def("consolidated_16bit_state_dict", [](PyEngine& e) {
        py::gil_scoped_release no_gil;
        return e.get().consolidated_16bit_state_dict();
      })
      .def("save_checkpoint",
           [](PyEngine& e, const std::string& save_dir, const std::string& tag, const std::string& client_state_json,
              bool save_latest) {
             // The one JSON reader: NaN (which json.dumps writes) and a key given twice are
             // refused here, and the bounds leave room for the manifest around it, so that
             // every checkpoint saved can be loaded.
             json::ReadResult read = json::read_json_text(
                 client_state_json, {.max_bytes = checkpoint::kMaxManifestBytes / 2, .max_depth = 60,
                                     .what = "a client_state"});
             ZT_CHECK(read.ok(), UsageError, "save_checkpoint: client_state is not JSON a checkpoint can hold: ",
                      read.problem, " (give plain numbers, strings, lists and dicts; NaN and Infinity are not JSON)");
             const config::Json client_state = std::move(read.value);
             py::gil_scoped_release no_gil;
             e.get().save_checkpoint(save_dir, tag, client_state, save_latest);
           })
      .def("load_checkpoint",
           [](PyEngine& e, const std::string& load_dir, const std::string& tag, bool load_module_strict,
              bool load_optimizer_states, bool load_lr_scheduler_states, bool load_module_only) -> py::object {
             CheckpointLoadOptions options;
             options.load_module_strict = load_module_strict;
             options.load_optimizer_states = load_optimizer_states;
             options.load_lr_scheduler_states = load_lr_scheduler_states;
             options.load_module_only = load_module_only;
             std::optional<LoadedCheckpoint> loaded;
             {
               py::gil_scoped_release no_gil;
               loaded = e.get().load_checkpoint(load_dir, tag, options);
             }
             if (!loaded) return py::none();
             return py::make_tuple(loaded->path, to_python(loaded->client_state));
           })
      .def("save_16bit_model",
           [](PyEngine& e, const std::string& save_dir, const std::string& filename, bool exclude_frozen_parameters,
              int64_t max_shard_bytes, std::vector<std::pair<std::string, py::bytes>> extra_files,
              const std::string& caller_error) {
             ModelSaveOptions options;
             options.exclude_frozen_parameters = exclude_frozen_parameters;
             options.max_shard_bytes = max_shard_bytes;
             for (auto& [name, bytes] : extra_files) options.extra_files.emplace_back(name, std::string(bytes));
             options.caller_error = caller_error;
             py::gil_scoped_release no_gil;   // gathers and writes; other ranks wait on them
             return e.get().save_16bit_model(save_dir, filename, options);
           },
           py::arg("save_dir"), py::arg("filename"), py::arg("exclude_frozen_parameters") = false,
           py::arg("max_shard_bytes") = ModelSaveOptions{}.max_shard_bytes,
           py::arg("extra_files") = std::vector<std::pair<std::string, py::bytes>>{}, py::arg("caller_error") = "")
      .def("wait_for_checkpoint", [](PyEngine& e) {
        py::gil_scoped_release no_gil;   // a collective: other ranks wait on it
        return e.get().wait_for_checkpoint();
      })
      .def("checkpoint_in_flight", [](PyEngine& e) -> std::optional<std::string> {
        if (!e.engine) return std::nullopt;   // closed: destroy() published it
        return e.engine->checkpoint_in_flight();
      })
      .def("destroy", [](PyEngine& e) {
        py::gil_scoped_release no_gil;
        e.engine.reset();
      });

  // The model arrives as its mirror; the groups as (name, params, lr or None, weight_decay or None).
  m.def(
      "initialize",
      [](std::shared_ptr<Mirror> model, const ConfigHandle& config,
         const std::vector<std::tuple<std::string, std::vector<at::Tensor>, std::optional<double>,
                                      std::optional<double>>>& groups,
         const py::object& process_group, const py::object& store, const std::string& device) {
        InitOptions options;
        options.comm = adopt_group(process_group, store, device, config.config);
        for (const auto& [name, params, lr, wd] : groups) options.param_groups.push_back({name, params, lr, wd});
        auto engine = std::make_shared<PyEngine>();
        engine->model = model;
        Config copy = config.config;
        py::gil_scoped_release no_gil;   // the rendezvous waits for the other ranks
        engine->engine.emplace(zerotrain::initialize(model->module, std::move(copy), std::move(options)));
        return engine;
      },
      py::arg("model"), py::arg("config"), py::arg("groups"), py::arg("process_group") = py::none(),
      py::arg("store") = py::none(), py::arg("device") = "cpu");
}

}  // namespace zerotrain::python
