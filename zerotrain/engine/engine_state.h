// The Engine's internals, shared by engine.cpp (setup, step), grad_sync.cpp (the backward
// hooks) and mixed_precision.cpp (the gradient check and loss scaling). What differs between
// ZeRO stages lives behind stages::Stage. Internal to engine/.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/checkpoint/protocol/async_save.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/offload/optimizer_offload.h"
#include "zerotrain/optim/flat_optimizer.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/precision/dtypes.h"
#include "zerotrain/precision/loss_scaler.h"
#include "zerotrain/precision/overflow_watch.h"
#include "zerotrain/stages/bucket_reducer.h"
#include "zerotrain/stages/stage.h"

namespace zerotrain::engine::detail {

using stages::GroupState;

// The gradients of a step, checked: their global L2 norm (still scaled) and whether any
// rank's hold an inf or nan, agreed over all ranks.
struct GradCheck {
  double sum_squares = 0;
  bool overflow = false;
};

struct EngineState {
  std::shared_ptr<torch::nn::Module> model;
  Config config;
  comm::Communicator comm;
  std::unique_ptr<stages::Stage> stage;
  precision::Dtypes precision;
  at::Device device{at::kCPU};   // the trained parameters' (Engine::device)
  std::optional<precision::LossScaler> scaler;    // fp16 only
  std::optional<precision::OverflowWatch> watch;  // with the scaler
  int64_t accumulation_steps = 1;
  bool overlap_comm = false;
  bool ignore_unused_parameters = true;
  std::vector<GroupState> groups;
  std::unique_ptr<optim::FlatOptimizer> optimizer;            // from the config, or
  std::shared_ptr<torch::optim::Optimizer> client_optimizer;  // the user's
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<offload::OptimizerOffload> offload;         // offload_optimizer: cpu or nvme
  // The AccumulateGrad nodes carrying our hooks (autograd only holds them weakly), with each
  // hook's key: the hooks point at this state and are removed with it.
  // The pointer type grad_accumulator() returns: std::shared_ptr<Node> in LibTorch 2.11,
  // c10::intrusive_ptr<Node> in the pinned 2.15 (an offline GPU machine may have the older).
  using AccumulatorPtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
  std::vector<std::pair<AccumulatorPtr, uintptr_t>> accumulators;

  int64_t micro_steps = 0;
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;
  std::optional<double> global_grad_norm;
  int no_sync_depth = 0;

  bool boundary_reduced = false;   // the last boundary micro-step's backward reduced its buckets
  stages::StagingMeter meter;
  std::unique_ptr<stages::BucketReducer> reducer;

  // Why the weights cannot be trusted, when they cannot: a load failed after it had begun to
  // overwrite them (a fragment damaged on disk), or an offloaded step failed halfway.
  // Training refuses to go on until a load succeeds.
  std::string damaged;
  void check_not_damaged() const;

  // checkpoint.async_save (checkpoint.cpp): the save being written in the background, and
  // the buffers of the last snapshot, reused by the next.
  std::unique_ptr<checkpoint::AsyncSave> pending_save;
  std::vector<at::Tensor> snapshot_buffers;
  // Collective: publishes the pending save once every rank's file is written (`wait`: waits
  // for this rank's first). The directory it published, if it did.
  std::optional<std::string> finish_pending_save(bool wait);

  std::optional<bool> forced_boundary;   // set_gradient_accumulation_boundary
  bool at_boundary() const {
    return forced_boundary ? *forced_boundary : (micro_steps + 1) % accumulation_steps == 0;
  }
  double loss_scale() const { return scaler ? scaler->scale() : 1.0; }
  const config::StageTraits& traits() const { return stage->traits(); }

  EngineState(std::shared_ptr<torch::nn::Module> model_in, Config config_in, comm::Communicator comm_in)
      : model(std::move(model_in)), config(std::move(config_in)), comm(std::move(comm_in)) {}
  EngineState(const EngineState&) = delete;
  EngineState& operator=(const EngineState&) = delete;
  // A model that outlives its engine must not call into it from backward.
  ~EngineState();

  // engine.cpp: each group's lr (and betas) from the schedule's current iteration.
  void apply_schedule();
  // Runs `f` with every group's master weights and optimizer states in memory (g.master and
  // optimizer->state), as checkpoints and user edits of the weights need them; with
  // optimizer offload they are brought in from the store and sent back after.
  template <class F>
  decltype(auto) with_states_in_memory(F&& f);
  // The same for `f` that only reads them (a save): they go back without being written.
  template <class F>
  decltype(auto) with_states_to_read(F&& f);
  template <class F>
  decltype(auto) with_offloaded_states(F&& f, bool write_back);

  // grad_sync.cpp
  void install_hooks();   // and creates the reducer
  void begin_backward();
  void on_gradient(size_t group, size_t param);
  void end_backward();
  void wait_reductions();

  // mixed_precision.cpp
  GradCheck check_gradients();
  // The parameters whose gradients hold an inf or nan on any rank (a collective), in the
  // order backward produces them.
  std::vector<std::string> overflowed_parameters();
  // fp16: updates the scale and logs DeepSpeed's line; the overflow watch may stop training.
  void update_loss_scale(const GradCheck& check);
  // fp32 and bf16 have no loss scale to lower: gradients that are not finite would turn every
  // weight into NaN, so training stops before the update (NumericsError with the diagnosis).
  // Every rank decides alike: the norm is the same on all of them.
  void stop_if_not_finite(double grad_norm);
  std::optional<int64_t> last_finite_norm_step;   // for the diagnosis
};

// offload_setup.cpp (docs/offload.md): the stage-3 parameter swap of offload_param "nvme"
// (null otherwise), for the stage's context; and the optimizer offload, once the groups are
// set up.
// `model`: its parameters' device decides what offload_param "cpu" means (a swap on a GPU only).
std::shared_ptr<stages::stage3::ParamSwap> make_param_swap(const Config& c, const config::StageTraits& traits, int rank,
                                                           torch::nn::Module& model);
void start_offload(EngineState& s);

template <class F>
decltype(auto) EngineState::with_states_in_memory(F&& f) {
  return with_offloaded_states(std::forward<F>(f), /*write_back=*/true);
}

template <class F>
decltype(auto) EngineState::with_states_to_read(F&& f) {
  return with_offloaded_states(std::forward<F>(f), /*write_back=*/false);
}

template <class F>
decltype(auto) EngineState::with_offloaded_states(F&& f, bool write_back) {
  if (!offload) return f();
  offload->bring_in(groups, *optimizer);
  struct Return {
    EngineState* s;
    bool write_back;
    void back() const {
      if (write_back) {
        s->offload->send_out(s->groups, *s->optimizer);
      } else {
        s->offload->put_back_unchanged(s->groups, *s->optimizer);
      }
    }
    ~Return() noexcept(false) {
      if (std::uncaught_exceptions() == 0) {
        back();
        return;
      }
      try {   // unwinding: the error in flight is the one to report
        back();
      } catch (const std::exception& e) {
        s->damaged = std::string("the offloaded optimizer states could not be written back: ") + e.what();
      }
    }
  } give_back{this, write_back};
  return f();
}

}  // namespace zerotrain::engine::detail
