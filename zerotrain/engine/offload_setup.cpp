// The engine's offload at start-up (docs/offload.md): where stage 3 keeps its parameter
// shards, and the store of the optimizer's states.
#include <torch/nn/module.h>

#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/engine/engine_state.h"
#include "zerotrain/io/from_config.h"
#include "zerotrain/io/offload_dir.h"
#include "zerotrain/offload/param_swap_host.h"
#include "zerotrain/offload/param_swap_nvme.h"

namespace zerotrain::engine::detail {

// offload_param "nvme" (docs/offload.md): stage 3 keeps each rank's parameter shard on disk.
// "cpu" keeps it in pinned host memory when the model is on a GPU; on a CPU it is in host
// memory anyway, and no swap is made.
std::shared_ptr<stages::stage3::ParamSwap> make_param_swap(const Config& c, const config::StageTraits& traits, int rank,
                                                           torch::nn::Module& model) {
  const auto& block = c.zero_optimization.offload_param;
  c10::Device device(c10::kCPU);
  for (const auto& p : model.parameters()) {
    device = p.device();
    break;
  }
  if (!block || !traits.shards_parameters || !block->enabled()) return nullptr;
  if (block->device == config::OffloadDevice::kCpu) {
    if (device.is_cpu()) return nullptr;
    auto swap = offload::make_host_param_swap(device);
    if (rank == 0) ZT_LOG_INFO("engine: offload_param cpu: the shard lives in pinned host memory");
    return swap;
  }
  // nvme_path must exist and be on a disk; zerotrain makes only its own folders inside it.
  const std::string dir = io::make_offload_dir(block->nvme_path.value_or("."),
                                               {"zerotrain_offload", "params", "rank" + std::to_string(rank)},
                                               "zero_optimization.offload_param.nvme_path");
  auto swap = offload::make_nvme_param_swap(dir, io::aio_options(c.aio));
  if (rank == 0) ZT_LOG_INFO("engine: ", swap->describe());
  return swap;
}

// offload_optimizer (docs/offload.md): the master weights and Adam moments move to the
// offload store, in host memory or on disk.
void start_offload(EngineState& s) {
  const auto& block = s.config.zero_optimization.offload_optimizer;
  if (!block || !block->enabled()) return;
  ZT_CHECK(!s.client_optimizer, ConfigError, "zero_optimization.offload_optimizer steps with DeepSpeedCPUAdam's fused "
           "update on states it keeps, so a client optimizer cannot be offloaded (DeepSpeed refuses it too unless it "
           "is a DeepSpeedCPUAdam; zero_force_ds_cpu_optimizer: false does not lift this here); put the optimizer in the "
           "config's \"optimizer\" block (`zerotrain train` adds AdamW when it has none), or remove offload_optimizer");
  offload::OptimizerOffloadOptions o;
  o.block = *block;
  o.aio = s.config.aio;
  o.sub_group_size = s.config.zero_optimization.sub_group_size;
  o.rank = s.comm.rank();
  s.offload = std::make_unique<offload::OptimizerOffload>(o, s.groups, *s.optimizer, *s.stage);
}

}  // namespace zerotrain::engine::detail
