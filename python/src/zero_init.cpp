// zero.Init for Python models: the C++ side of python/zerotrain/runtime/zero/init.py. As each
// module finishes its __init__, its own parameters are cut: rank 0's values broadcast, this
// rank's chunk kept (comm::chunk_range, as zerotrain::ZeroInit keeps it), the parameter's
// memory freed; so the model is never whole on any rank. The chunks go to the engine at
// initialize, which places them one bucket at a time (stages/stage3/preshard.h).
#include <optional>
#include <unordered_map>
#include <utility>

#include "bindings.h"
#include "config_handle.h"
#include "group.h"
#include "mirror.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/precision/dtypes.h"
#include "zerotrain/stages/stage3/preshard.h"
#include "zerotrain/stages/stage3/sharded.h"
#include "zerotrain/stages/stage3/storage.h"

namespace zerotrain::python {
namespace {

using stages::stage3::allocate_storage;
using stages::stage3::free_storage;
using stages::stage3::PreShard;
using stages::stage3::PreSharded;

class ParamCutter {
 public:
  // `adopted`: the script's torch.distributed group, or nullopt to open the engine's own.
  // `from_rank0` false: no broadcast when cutting, each rank keeps the chunk of its own
  // values (a loader fills every chunk from the checkpoint next; rank 0's uninitialised
  // values would cost a broadcast of the whole model for nothing).
  ParamCutter(const Config& config, std::optional<comm::Communicator> adopted, bool from_rank0)
      : from_rank0_(from_rank0) {
    ZT_CHECK(config.zero_optimization.stage == 3, ConfigError, "zero.Init cuts parameters as ZeRO stage 3 keeps "
             "them, but the config asks for stage ", static_cast<int>(config.zero_optimization.stage),
             "; set \"zero_optimization\": {\"stage\": 3}, or build the model without zero.Init");
    dtype_ = precision::dtypes_from_config(config).model;
    cut_ = std::make_shared<PreSharded>(
        PreSharded{adopted ? std::move(*adopted) : comm::Communicator::init(comm::options_from_config(config)), {}});
  }

  // Cuts each parameter not cut yet; every rank calls it for the same parameters.
  void cut(const std::vector<at::Tensor>& params) {
    for (const at::Tensor& p : params) {
      if (index_.count(p.unsafeGetTensorImpl())) continue;
      index_[p.unsafeGetTensorImpl()] = cut_->params.size();
      cut_->params.push_back(stages::stage3::cut_parameter(comm(), p, dtype_, std::nullopt, from_rank0_));
    }
  }

  // Whole again on every rank (before initialize: zero.GatheredParameters).
  void gather(const std::vector<at::Tensor>& params) {
    for (const at::Tensor& p : params) {
      PreShard* piece = find(p);
      if (!piece || !piece->chunk.defined() || stages::stage3::storage_allocated(piece->param)) continue;
      allocate_storage(piece->param);
      stages::stage3::gather_preshard(comm(), *piece, piece->param.detach().reshape(-1));
    }
  }

  // Cut again; with `modifier_rank`, that rank's values (what it wrote while gathered) become
  // everyone's.
  void release(const std::vector<at::Tensor>& params, std::optional<int> modifier_rank) {
    c10::NoGradGuard no_grad;
    for (const at::Tensor& p : params) {
      PreShard* piece = find(p);
      if (!piece || !piece->chunk.defined() || !stages::stage3::storage_allocated(piece->param)) continue;
      at::Tensor flat = piece->param.detach().reshape(-1);
      if (modifier_rank) {
        comm().broadcast(flat, *modifier_rank).wait();
        const auto range = comm::chunk_range(flat.numel(), comm().world_size(), comm().rank());
        piece->chunk.copy_(flat.narrow(0, range.offset, range.numel));
      }
      free_storage(piece->param);
    }
  }

  // After initialize: parameters the engine did not take (frozen ones: the engine trains
  // only the others) are made whole again; the rest were placed. Every rank calls it.
  void restore_unplaced(const std::vector<at::Tensor>& model_params) {
    for (const at::Tensor& p : model_params) {
      PreShard* piece = find(p);
      if (!piece || !piece->chunk.defined()) continue;
      if (!stages::stage3::storage_allocated(piece->param)) {
        allocate_storage(piece->param);
        stages::stage3::gather_preshard(comm(), *piece, piece->param.detach().reshape(-1));
      }
      piece->chunk = at::Tensor();
    }
  }

  // This rank's chunk of `p` and where it starts in p's flat elements (comm::chunk_range), or
  // nullopt when p was not cut here or was placed already. The chunk is the cutter's own
  // tensor: what is written into it is what the engine places (a loader fills it from a file).
  std::optional<std::pair<at::Tensor, int64_t>> chunk_of(const at::Tensor& p) {
    PreShard* piece = find(p);
    if (!piece || !piece->chunk.defined()) return std::nullopt;
    const auto range = comm::chunk_range(piece->param.numel(), comm().world_size(), comm().rank());
    return std::make_pair(piece->chunk, range.offset);
  }

  // Parameters that left the model after they were cut (a weight tied to another replaces
  // it): their chunks go, so that initialize neither places nor re-gathers them. Every rank
  // drops the same ones.
  void drop(const std::vector<at::Tensor>& params) {
    for (const at::Tensor& p : params) {
      PreShard* piece = find(p);
      if (piece) piece->chunk = at::Tensor();
    }
  }

  // Hands the chunks to the engine through the model's first unit (stages/stage3/preshard.h).
  void give_to(Mirror& unit) {
    ZT_CHECK(unit.unit != nullptr, InternalError, "zero.Init's chunks given to a module that is not a unit");
    unit.unit->adopt_presharded(cut_);
  }

  comm::Communicator& comm() { return cut_->comm; }

 private:
  PreShard* find(const at::Tensor& p) {
    auto it = index_.find(p.unsafeGetTensorImpl());
    return it == index_.end() ? nullptr : &cut_->params[it->second];
  }

  at::ScalarType dtype_ = at::kFloat;
  bool from_rank0_ = true;
  std::shared_ptr<PreSharded> cut_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
};

}  // namespace

void bind_zero_init(py::module_& m) {
  py::class_<ParamCutter, std::shared_ptr<ParamCutter>>(m, "ParamCutter")
      .def(py::init([](const ConfigHandle& config, const py::object& process_group, const py::object& store,
                       const std::string& device, bool from_rank0) {
             auto adopted = adopt_group(process_group, store, device, config.config);
             py::gil_scoped_release no_gil;   // joins the job: waits for the other ranks
             return std::make_shared<ParamCutter>(config.config, std::move(adopted), from_rank0);
           }),
           py::arg("config"), py::arg("process_group") = py::none(),
           py::arg("store") = py::none(), py::arg("device") = "cpu", py::arg("from_rank0") = true)
      .def("cut", [](ParamCutter& c, const std::vector<at::Tensor>& params) {
        py::gil_scoped_release no_gil;
        c.cut(params);
      })
      .def("gather", [](ParamCutter& c, const std::vector<at::Tensor>& params) {
        py::gil_scoped_release no_gil;
        c.gather(params);
      })
      .def("release", [](ParamCutter& c, const std::vector<at::Tensor>& params, std::optional<int> modifier_rank) {
        py::gil_scoped_release no_gil;
        c.release(params, modifier_rank);
      })
      .def("restore_unplaced", [](ParamCutter& c, const std::vector<at::Tensor>& params) {
        py::gil_scoped_release no_gil;
        c.restore_unplaced(params);
      })
      .def("chunk_of", &ParamCutter::chunk_of, py::arg("param"),
           "(chunk, offset): this rank's chunk of the parameter, the cutter's own tensor, and its first "
           "element's index in the flat parameter; None when not cut here or already placed")
      .def("drop", [](ParamCutter& c, const std::vector<at::Tensor>& params) { c.drop(params); })
      .def("give_to", &ParamCutter::give_to);
}

}  // namespace zerotrain::python
