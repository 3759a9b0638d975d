// What a unit's parameters become under zerotrain::ZeroInit (stages/stage3/zero_init.h):
// each keeps its shape and dtype but no memory, and this rank holds its chunk of the flat
// elements (comm::chunk_range), rank 0's values. Stage 3 places them from the chunks when
// the engine starts, one bucket at a time, so the model is never whole on any rank.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "zerotrain/comm/communicator.h"

namespace torch::nn {
class Module;
}

namespace zerotrain::config {
struct StageTraits;
}

namespace zerotrain::stages::stage3 {

struct PreShard {
  at::Tensor param;   // the model's parameter, without memory
  at::Tensor chunk;   // (chunk_range(param.numel(), world, rank).numel,) this rank's elements; undefined once placed
};

struct PreSharded {
  comm::Communicator comm;   // the ranks the chunks were cut for
  std::vector<PreShard> params;
};

// Under an active ZeroInit of this thread: the parameters of `unit` that no inner unit took,
// cut into chunks (a broadcast from rank 0 per parameter, then the memory freed). Null when
// no ZeroInit is active.
std::shared_ptr<PreSharded> preshard_if_active(torch::nn::Module& unit);

// Where the chunks come from instead of rank 0's values: a loader of pretrained weights
// (models/hf/hf_load.h) that reads each rank's elements straight from the files, so a
// pretrained model is never whole on any rank, not even one unit at a time. While a
// ChunkSourceScope is alive in this thread, each parameter a unit built under ZeroInit cuts
// gets only its chunk allocated (chunk_range(param.numel(), world, rank): `numel` elements
// from flat element `offset`, in ZeroInit's dtype for a floating parameter, on its device),
// `source` fills it, and the parameter's own memory is dropped without being read (the
// builder can create it with at::empty: its pages are never touched). No broadcast, no
// collective: every rank must fill its chunk from the same weights. Without a scope,
// preshard_if_active broadcasts rank 0's values as before.
using ChunkSource =
    std::function<void(const at::Tensor& param, int64_t offset, int64_t numel, at::Tensor& chunk_out)>;

class ChunkSourceScope {
 public:
  explicit ChunkSourceScope(ChunkSource source);
  ~ChunkSourceScope();
  ChunkSourceScope(const ChunkSourceScope&) = delete;
  ChunkSourceScope& operator=(const ChunkSourceScope&) = delete;

 private:
  ChunkSource source_;
  const ChunkSource* previous_ = nullptr;   // an enclosing scope of this thread
};

// One parameter cut: in `dtype` (floating parameters) and on `device` if given, rank 0's
// values broadcast, this rank's chunk kept, the parameter left without memory. A collective:
// every rank cuts the same parameters in the same order. With `from_rank0` false there is no
// broadcast (and no collective): each rank keeps the chunk of its own values, for a caller
// that writes every chunk next (a pretrained model's loader).
PreShard cut_parameter(comm::Communicator& comm, const at::Tensor& param, at::ScalarType dtype,
                       std::optional<c10::Device> device = std::nullopt, bool from_rank0 = true);

// The communicator the model's units were cut for, if it was built under ZeroInit.
std::optional<comm::Communicator> preshard_comm(torch::nn::Module& model);

// Before initialize touches a parameter: throws ConfigError when `model` was built under
// ZeroInit and this engine cannot take it as it is (a stage that keeps whole parameters,
// another training dtype, other ranks).
void check_presharded(torch::nn::Module& model, const config::StageTraits& traits, at::ScalarType model_dtype,
                      const comm::Communicator& comm);

// The full elements of `piece` into `flat_out` (param.numel() elements) from every rank's
// chunk: a collective, every rank calls it for the same parameter.
void gather_preshard(comm::Communicator& comm, const PreShard& piece, const at::Tensor& flat_out);

}  // namespace zerotrain::stages::stage3
