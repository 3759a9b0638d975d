#include "zerotrain/stages/stage3/zero_init.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include <unordered_set>

#include "zerotrain/config/stage_traits.h"
#include "zerotrain/core/error.h"
#include "zerotrain/precision/dtypes.h"
#include "zerotrain/stages/stage3/preshard.h"
#include "zerotrain/stages/stage3/sharded.h"
#include "zerotrain/stages/stage3/storage.h"

namespace zerotrain {

struct ZeroInit::State {
  comm::Communicator comm;
  at::ScalarType dtype;
  std::optional<c10::Device> device;
  // Parameters already cut: an inner unit's, or one a unit shares with an earlier one.
  std::unordered_set<const c10::TensorImpl*> cut;
};

namespace {

thread_local ZeroInit::State* active = nullptr;
thread_local const stages::stage3::ChunkSource* chunk_source = nullptr;   // ChunkSourceScope

comm::Communicator join(const Config& config, std::optional<comm::Communicator> comm) {
  const auto traits = config::traits_of(static_cast<int>(config.zero_optimization.stage));
  ZT_CHECK(traits.shards_parameters, ConfigError, "zerotrain::ZeroInit cuts parameters as ZeRO stage 3 keeps them, "
           "but the config asks for stage ", traits.number, "; set \"zero_optimization\": {\"stage\": 3} or build "
           "the model without ZeroInit");
  return comm ? *comm : comm::Communicator::init(comm::options_from_config(config));
}

// Each ShardedModule of `model` that holds parameters cut under ZeroInit.
std::vector<ShardedModule*> presharded_units(torch::nn::Module& model) {
  std::vector<ShardedModule*> units;
  auto visit = [&](torch::nn::Module* m) {
    auto* s = dynamic_cast<ShardedModule*>(m);
    if (s && s->presharded()) units.push_back(s);
  };
  visit(&model);
  for (const auto& m : model.modules(/*include_self=*/false)) visit(m.get());
  return units;
}

// A parameter cut from a ChunkSource: only the chunk is allocated; the parameter keeps its
// shape and takes the chunk's dtype and device (as cut_parameter leaves it) on a storage of
// no bytes, so its old memory, never written, is released and no full copy is made, on the
// host or on the device.
stages::stage3::PreShard cut_from_source(const comm::Communicator& comm, const at::Tensor& param,
                                         at::ScalarType dtype, std::optional<c10::Device> device,
                                         const stages::stage3::ChunkSource& source) {
  const auto range = comm::chunk_range(param.numel(), comm.world_size(), comm.rank());
  at::TensorOptions options = param.options().dtype(param.is_floating_point() ? dtype : param.scalar_type());
  if (device) options = options.device(*device);
  at::Tensor chunk = at::empty({range.numel}, options);
  source(param, range.offset, range.numel, chunk);
  at::Tensor shell = at::empty({0}, options);
  shell.unsafeGetTensorImpl()->set_sizes_contiguous(param.sizes());
  at::Tensor p = param;
  p.set_data(shell);
  return {p, std::move(chunk)};
}

}  // namespace

ZeroInit::ZeroInit(const Config& config, std::optional<comm::Communicator> comm, std::optional<c10::Device> device)
    : state_(std::make_unique<State>(
          State{join(config, std::move(comm)), precision::dtypes_from_config(config).model, device, {}})),
      previous_(active) {
  active = state_.get();
}

ZeroInit::~ZeroInit() { active = previous_; }

const comm::Communicator& ZeroInit::comm() const { return state_->comm; }

namespace stages::stage3 {

std::shared_ptr<PreSharded> preshard_if_active(torch::nn::Module& unit) {
  ZeroInit::State* s = active;
  if (!s) return nullptr;
  auto out = std::make_shared<PreSharded>(PreSharded{s->comm, {}});
  c10::NoGradGuard no_grad;
  for (auto& p : unit.parameters()) {
    if (!s->cut.insert(p.unsafeGetTensorImpl()).second) continue;
    out->params.push_back(chunk_source ? cut_from_source(s->comm, p, s->dtype, s->device, *chunk_source)
                                       : cut_parameter(s->comm, p, s->dtype, s->device));
  }
  return out;
}

ChunkSourceScope::ChunkSourceScope(ChunkSource source) : source_(std::move(source)), previous_(chunk_source) {
  chunk_source = &source_;
}

ChunkSourceScope::~ChunkSourceScope() { chunk_source = previous_; }

PreShard cut_parameter(comm::Communicator& comm, const at::Tensor& param, at::ScalarType dtype,
                       std::optional<c10::Device> device, bool from_rank0) {
  c10::NoGradGuard no_grad;
  at::Tensor full = param.detach();
  if (full.is_floating_point() && full.scalar_type() != dtype) full = full.to(dtype);
  if (device && full.device() != *device) full = full.to(*device);
  // Its own memory, all of it: a parameter that is a view of a larger buffer gets a copy,
  // so freeing it frees nothing else.
  if (full.storage_offset() != 0 || !full.is_contiguous() || full.storage().nbytes() != full.nbytes()) {
    full = full.contiguous().clone();
  }
  if (from_rank0) comm.broadcast(full, 0).wait();
  const auto range = comm::chunk_range(full.numel(), comm.world_size(), comm.rank());
  at::Tensor chunk = full.reshape(-1).narrow(0, range.offset, range.numel).clone();
  at::Tensor p = param;
  p.set_data(full);
  free_storage(p);
  return {p, std::move(chunk)};
}

std::optional<comm::Communicator> preshard_comm(torch::nn::Module& model) {
  const auto units = presharded_units(model);
  if (units.empty()) return std::nullopt;
  return units.front()->presharded()->comm;
}

void check_presharded(torch::nn::Module& model, const config::StageTraits& traits, at::ScalarType model_dtype,
                      const comm::Communicator& comm) {
  for (ShardedModule* unit : presharded_units(model)) {
    const PreSharded& cut = *unit->presharded();
    ZT_CHECK(traits.shards_parameters, ConfigError, "the model was built under zerotrain::ZeroInit, so its units "
             "hold 1/N of their parameters, but the config asks for ZeRO stage ", traits.number, ", which needs "
             "them whole; train it at stage 3, or build it without ZeroInit");
    ZT_CHECK(cut.comm.world_size() == comm.world_size() && cut.comm.rank() == comm.rank(), ConfigError,
             "the model was cut by zerotrain::ZeroInit for rank ", cut.comm.rank(), " of ", cut.comm.world_size(),
             " but the engine runs as rank ", comm.rank(), " of ", comm.world_size(),
             "; give initialize the communicator ZeroInit used (InitOptions::comm = zero_init.comm())");
    for (const PreShard& piece : cut.params) {
      ZT_CHECK(piece.param.scalar_type() == model_dtype, ConfigError, "the model was built under zerotrain::ZeroInit "
               "in ", precision::dtype_name(piece.param.scalar_type()), " but the config trains in ",
               precision::dtype_name(model_dtype), "; give ZeroInit the config that initialize gets");
    }
  }
}

void gather_preshard(comm::Communicator& comm, const PreShard& piece, const at::Tensor& flat_out) {
  ZT_INTERNAL_ASSERT(piece.chunk.defined(), "a parameter cut by ZeroInit was placed twice");
  comm.all_gather(piece.chunk, flat_out).wait();
}

}  // namespace stages::stage3
}  // namespace zerotrain
