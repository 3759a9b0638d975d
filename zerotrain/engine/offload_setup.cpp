// The engine's offload at start-up (docs/offload.md): where stage 3 keeps its parameter
// shards, and the store of the optimizer's states.
#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/engine/engine_state.h"
#include "zerotrain/io/from_config.h"
#include "zerotrain/offload/param_swap_nvme.h"

namespace zerotrain::engine::detail {

// offload_param "nvme" (docs/offload.md): stage 3 keeps each rank's parameter shard on disk.
// "cpu" keeps it in host memory, which is where it is anyway without a GPU.
std::shared_ptr<stages::stage3::ParamSwap> make_param_swap(const Config& c, const stages::StageTraits& traits, int rank) {
  const auto& block = c.zero_optimization.offload_param;
  if (!block || block->device != config::OffloadDevice::kNvme || !traits.shards_parameters) return nullptr;
  const std::string dir = (std::filesystem::path(block->nvme_path.value_or(".")) / "zerotrain_offload" / "params" /
                           ("rank" + std::to_string(rank)))
                              .string();
  auto swap = offload::make_nvme_param_swap(dir, io::aio_options(c.aio));
  if (rank == 0) ZT_LOG_INFO("engine: ", swap->describe());
  return swap;
}

// offload_optimizer (docs/offload.md): the master weights and Adam moments move to the
// offload store, in host memory or on disk.
void start_offload(EngineState& s) {
  const auto& block = s.config.zero_optimization.offload_optimizer;
  if (!block || block->device == config::OffloadDevice::kNone) return;
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
