// ZeRO-Offload and ZeRO-Infinity's optimizer half (docs/offload.md): the fp32 master shard
// and the Adam moments live in host memory (`offload_optimizer.device: cpu`) or on a disk
// (`nvme`), and the step streams them through the fused CPU Adam one sub-group at a time,
// reading 16-bit gradients and writing 16-bit weights directly. Internal to engine/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/config/config.h"
#include "zerotrain/offload/state_store.h"

namespace zerotrain::optim {
class FlatOptimizer;
}
namespace zerotrain::stages {
struct GroupState;
class Stage;
}

namespace zerotrain::offload {

class DeviceStaging;

struct OptimizerOffloadOptions {
  config::OffloadOptimizerConfig block;
  config::AioConfig aio;
  int64_t sub_group_size = 1'000'000'000;   // elements
  int rank = 0;
};

class OptimizerOffload {
 public:
  // Builds each group's master weights in the store from the stage's weights (the stage
  // made none: StageContext::master_offloaded), a sub-group at a time. `optimizer` must be Adam or AdamW (NotSupported otherwise, as the fused CPU
  // step is Adam's).
  OptimizerOffload(const OptimizerOffloadOptions& options, std::vector<stages::GroupState>& groups,
                   optim::FlatOptimizer& optimizer, stages::Stage& stage);
  ~OptimizerOffload();

  // The optimizer step of every group, from the stage's gradient shards divided by
  // `grad_divisor`; the new weights go straight into the stage's parameters (publish_weights
  // then spreads them).
  void step(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer, stages::Stage& stage,
            double grad_divisor);

  // The states whole in memory (g.master and the optimizer's state, for checkpoints and
  // user edits of the weights), and back to the store.
  void bring_in(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer);
  void send_out(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer);
  // Back without writing, for a caller that only read them (a save): the store still holds
  // the same values, so an NVMe store is spared writing every state again.
  void put_back_unchanged(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer);

  // Where the states are between steps: in files (nvme), so that a save streams them with
  // read_state rather than bringing them in whole.
  bool on_disk() const;
  bool in_memory() const { return in_memory_; }
  // Elements [offset, offset + numel) of group `group`'s master (which 0), exp_avg (1) or
  // exp_avg_sq (2) shard, read from the store into `out`.
  void read_state(std::size_t group, int which, int64_t offset, int64_t numel, float* out);
  // The reverse, for a load that streams the states in: `in` into the store, through its own
  // buffers. Then publish_loaded() puts them on disk and gives the stage's parameters the
  // loaded master's values (the pass over the sub-groups a step makes, with no update), for
  // the stage's publish_weights to spread.
  void write_state(std::size_t group, int which, int64_t offset, int64_t numel, const float* in);
  void publish_loaded(std::vector<stages::GroupState>& groups, stages::Stage& stage);

  int64_t host_nbytes() const;
  int64_t disk_nbytes() const { return store_->disk_nbytes(); }
  std::string describe() const;

 private:
  // One pass over every sub-group, in order: `work(sub-group, its arrays, begin, end,
  // weights_out, weights_dtype)` for each overlap [begin, end) (shard offsets) of a sub-group
  // with a piece of the stage's weights, which gets that overlap's weights at `weights_out`.
  using SubGroupWork = std::function<void(const SubGroup&, const SubGroupArrays&, int64_t begin, int64_t end,
                                          char* weights_out, at::ScalarType weights_dtype)>;
  // `updates_states`: the work changes the arrays, which are then written back.
  void walk(std::vector<stages::GroupState>& groups, stages::Stage& stage, const SubGroupWork& work,
            bool updates_states);
  void hand_to_optimizer(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer);

  OptimizerOffloadOptions options_;
  int64_t sub_group_numel_ = 0;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<DeviceStaging> staging_;   // a GPU stage's gradients and weights, through pinned memory
  bool in_memory_ = false;
};

}  // namespace zerotrain::offload
