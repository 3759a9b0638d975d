#include "zerotrain/offload/optimizer_offload.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/estimate/offload_bytes.h"
#include "zerotrain/io/from_config.h"
#include "zerotrain/io/offload_dir.h"
#include "zerotrain/offload/device_staging.h"
#include "zerotrain/offload/fused_step.h"
#include "zerotrain/optim/flat_optimizer.h"
#include "zerotrain/stages/group.h"
#include "zerotrain/stages/stage.h"

namespace zerotrain::offload {
namespace {

std::unique_ptr<StateStore> make_store(const OptimizerOffloadOptions& o, int64_t sub_numel) {
  if (o.block.device == config::OffloadDevice::kCpu) return make_host_store(o.block.pin_memory);
  NvmeStoreOptions n;
  // nvme_path must exist and be on a disk; zerotrain makes only its own folders inside it.
  n.dir = io::make_offload_dir(o.block.nvme_path.value_or("."),
                               {"zerotrain_offload", "optimizer", "rank" + std::to_string(o.rank)},
                               "zero_optimization.offload_optimizer.nvme_path");
  n.aio = io::aio_options(o.aio);
  n.max_sub_group_numel = sub_numel;
  n.pipeline_read = o.block.pipeline_read;
  n.pipeline_write = o.block.pipeline_write;
  // The estimator sizes the same buffers with the same function (estimate/offload_bytes.h).
  n.buffer_sets = estimate::nvme_buffer_sets({o.block.buffer_count, o.block.pipeline_read, o.block.pipeline_write});
  return make_nvme_store(n);
}

}  // namespace

OptimizerOffload::OptimizerOffload(const OptimizerOffloadOptions& options, std::vector<stages::GroupState>& groups,
                                   optim::FlatOptimizer& optimizer, stages::Stage& stage)
    : options_(options) {
  ZT_CHECK(optimizer.fused_adam_options({}).has_value(), NotSupported, "offload_optimizer: the offloaded step is "
           "DeepSpeedCPUAdam's, for Adam and AdamW; this config's optimizer is ", optimizer.name(),
           ". Use Adam or AdamW, or set offload_optimizer.device to \"none\"");
  int64_t largest = 0;
  for (const auto& g : groups) largest = std::max(largest, g.layout.shard_numel());
  sub_group_numel_ = estimate::sub_group_numel(options.sub_group_size, largest);
  store_ = make_store(options, sub_group_numel_);
  staging_ = std::make_unique<DeviceStaging>();
  for (auto& g : groups) {
    ZT_INTERNAL_ASSERT(!g.master.defined(), "the stage made a master that optimizer offload keeps itself");
    store_->add_group(g.index, g.layout.shard_numel(), [&](int64_t offset, int64_t numel, float* out) {
      stage.copy_shard_weights(g, offset, at::from_blob(out, {numel}, at::kFloat));
    });
  }
  hand_to_optimizer(groups, optimizer);
}

OptimizerOffload::~OptimizerOffload() = default;

int64_t OptimizerOffload::host_nbytes() const { return store_->host_nbytes() + staging_->host_nbytes(); }

std::string OptimizerOffload::describe() const {
  return ::zerotrain::detail::str("optimizer states offloaded to ", store_->describe(), ", sub-groups of ",
                                  sub_group_numel_, " elements");
}

void OptimizerOffload::step(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer,
                            stages::Stage& stage, double grad_divisor) {
  ZT_INTERNAL_ASSERT(!in_memory_, "offload step with the states brought in");
  std::vector<optim::AdamCoefficients> coefficients;
  for (auto& g : groups) {
    const optim::AdamOptions o = *optimizer.fused_adam_options(g.hyper);
    const int64_t t = optimizer.count_step(g.index);
    coefficients.push_back(
        optim::adam_coefficients(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.adamw_mode, o.bias_correction, t));
  }
  const float divisor = static_cast<float>(grad_divisor);
  // A GPU stage's gradient shards come down to pinned host memory, all groups at once.
  for (auto& g : groups) staging_->start_gradients(g.index, stage.step_gradients(g));
  staging_->wait_gradients();
  walk(groups, stage, [&](const SubGroup& sg, const SubGroupArrays& arrays, int64_t begin, int64_t end, char* weights_out,
                          at::ScalarType weights_dtype) {
    const at::Tensor& grads = staging_->host_gradients(groups[sg.group].index);
    const int64_t local = begin - sg.offset;
    FusedStepArrays a;
    a.master = arrays.master + local;
    a.exp_avg = arrays.exp_avg + local;
    a.exp_avg_sq = arrays.exp_avg_sq + local;
    a.grads = static_cast<const char*>(grads.data_ptr()) + begin * grads.element_size();
    a.grad_dtype = grads.scalar_type();
    a.weights_out = weights_out;
    a.weights_dtype = weights_dtype;
    a.numel = end - begin;
    fused_adam_step(coefficients[sg.group], a, divisor);
  }, /*updates_states=*/true);
}

void OptimizerOffload::walk(std::vector<stages::GroupState>& groups, stages::Stage& stage, const SubGroupWork& work,
                            bool updates_states) {
  std::vector<SubGroup> order;
  for (const auto& g : groups) {
    const int64_t numel = g.layout.shard_numel();
    for (int64_t offset = 0; offset < numel; offset += sub_group_numel_) {
      order.push_back({g.index, offset, std::min(sub_group_numel_, numel - offset)});
    }
  }
  std::vector<std::vector<stages::ShardPiece>> pieces;
  for (auto& g : groups) pieces.push_back(stage.weight_pieces(g));
  std::vector<std::vector<bool>> on_disk_pieces;   // per piece: filled here, handed to the stage when complete
  for (const auto& p : pieces) {
    on_disk_pieces.emplace_back();
    for (const auto& piece : p) on_disk_pieces.back().push_back(!piece.weights.defined());
  }
  store_->begin_pass(order);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const SubGroup& sg = order[k];
    stages::GroupState& g = groups[sg.group];
    const SubGroupArrays arrays = store_->acquire(k);
    // The sub-group meets the stage's pieces of the shard (stage 1-2: one per bucket); the
    // weights of each overlap go to that piece. A piece whose weights live on disk is
    // filled in a tensor of its own and handed to the stage once its last element is in.
    for (std::size_t pi = 0; pi < pieces[sg.group].size(); ++pi) {
      stages::ShardPiece& piece = pieces[sg.group][pi];
      const int64_t begin = std::max(sg.offset, piece.shard_offset);
      const int64_t end = std::min(sg.offset + sg.numel, piece.shard_offset + piece.numel);
      if (begin >= end) continue;
      const bool on_disk = on_disk_pieces[sg.group][pi];
      if (on_disk && !piece.weights.defined()) piece.weights = at::empty({piece.numel}, piece.dtype);
      const at::Tensor out = staging_->host_weights(sg.group, pi, piece.weights);
      work(sg, arrays, begin, end,
           static_cast<char*>(out.data_ptr()) + (begin - piece.shard_offset) * out.element_size(), out.scalar_type());
      if (end == piece.shard_offset + piece.numel) staging_->finish_weights(sg.group, pi, piece.weights);
      if (on_disk && end == piece.shard_offset + piece.numel) {
        stage.store_weight_piece(g, pi, piece.weights);
        piece.weights = at::Tensor();
      }
    }
    if (updates_states) {
      store_->release(k);
    } else {
      store_->release_unchanged(k);
    }
  }
  store_->finish_pass();
}

void OptimizerOffload::write_state(std::size_t group, int which, int64_t offset, int64_t numel, const float* in) {
  ZT_INTERNAL_ASSERT(!in_memory_, "offload write_state with the states brought in");
  store_->write_range(group, which, offset, numel, in);
}

void OptimizerOffload::publish_loaded(std::vector<stages::GroupState>& groups, stages::Stage& stage) {
  ZT_INTERNAL_ASSERT(!in_memory_, "offload publish_loaded with the states brought in");
  store_->flush_writes();
  // The pass a step makes, with the master's values as they are for the new weights; the
  // states are only read, so nothing is written back.
  walk(
      groups, stage,
      [](const SubGroup& sg, const SubGroupArrays& arrays, int64_t begin, int64_t end, char* weights_out,
         at::ScalarType weights_dtype) {
        const at::Tensor master = at::from_blob(arrays.master + (begin - sg.offset), {end - begin}, at::kFloat);
        at::from_blob(weights_out, {end - begin}, weights_dtype).copy_(master);
      },
      /*updates_states=*/false);
}

void OptimizerOffload::bring_in(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer) {
  if (in_memory_) return;
  for (auto& g : groups) {
    GroupStates s = store_->read_group(g.index);
    g.master = s.master;
    optimizer.restore(g.index, optimizer.steps(g.index), {{"exp_avg", s.exp_avg}, {"exp_avg_sq", s.exp_avg_sq}});
    g.weights_in_place = false;
  }
  in_memory_ = true;
}

void OptimizerOffload::send_out(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer) {
  if (!in_memory_) return;
  for (auto& g : groups) {
    const auto& st = optimizer.state(g.index);
    store_->write_group(g.index, {g.master, st.at("exp_avg"), st.at("exp_avg_sq")});
  }
  hand_to_optimizer(groups, optimizer);
}

bool OptimizerOffload::on_disk() const { return !store_->resident(); }

void OptimizerOffload::read_state(std::size_t group, int which, int64_t offset, int64_t numel, float* out) {
  store_->read_range(group, which, offset, numel, out);
}

void OptimizerOffload::put_back_unchanged(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer) {
  if (in_memory_) hand_to_optimizer(groups, optimizer);
}

// Between steps: the engine's master and the optimizer's state are the store's tensors
// (host memory), or absent (on disk); the step writes the new weights into the parameters.
void OptimizerOffload::hand_to_optimizer(std::vector<stages::GroupState>& groups, optim::FlatOptimizer& optimizer) {
  for (auto& g : groups) {
    g.weights_in_place = true;
    if (store_->resident()) {
      // Host memory: the engine's master and the optimizer's state are the store's tensors.
      GroupStates mine = store_->read_group(g.index);
      g.master = mine.master;
      optimizer.restore(g.index, optimizer.steps(g.index), {{"exp_avg", mine.exp_avg}, {"exp_avg_sq", mine.exp_avg_sq}});
    } else {
      g.master = at::Tensor();
      optimizer.restore(g.index, optimizer.steps(g.index), {});
    }
  }
  in_memory_ = false;
}

}  // namespace zerotrain::offload
