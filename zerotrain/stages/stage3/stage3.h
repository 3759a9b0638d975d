// ZeRO stage 3 (docs/stage3.md): stage 2, and the parameters too live as shards, 1/N per
// rank; a unit's full parameters exist only while it computes (zerotrain::Sharded marks
// units). Each unit is one gradient bucket per parameter group: when all its gradients are
// in, they are reduce-scattered into the shard and its full parameters are freed.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "zerotrain/stages/stage3/param_swap.h"
#include "zerotrain/stages/stage3/preshard.h"
#include "zerotrain/stages/stage3/unit_hooks.h"
#include "zerotrain/stages/stage3/units.h"
#include "zerotrain/stages/stage_impls.h"
#include "zerotrain/stages/unit_schedule.h"

namespace zerotrain::stages::stage3 {

struct Stage3Options {
  PersistenceOptions persistence;
  // DeepSpeed's bounds, in elements: what one prefetch may gather ahead, the most
  // parameters gathered at once that prefetching and keeping may reach (the units needed
  // now are always gathered), and how close a unit's next use must be to keep it.
  ScheduleOptions schedule;
};

class Stage3 final : public Stage2 {
 public:
  Stage3(config::StageTraits traits, StageContext context, Stage3Options options);
  ~Stage3() override;

  void attach(torch::nn::Module& model) override;
  void arrange(GroupState& g, int64_t bucket_numel) override;
  void place(GroupState& g) override;
  void finish_setup() override;
  void detach() override;

  void begin_backward() override;
  void on_gradient(GroupState& g, std::size_t param, const at::Tensor& grad) override;
  void on_unused(GroupState& g, std::size_t param) override;
  void end_backward() override;
  void publish_weights(std::vector<GroupState>& groups) override;
  std::vector<ShardPiece> weight_pieces(GroupState& g) override;
  void store_weight_piece(GroupState& g, std::size_t piece, const at::Tensor& weights) override;
  void copy_shard_weights(GroupState& g, int64_t offset, const at::Tensor& out) override;
  int64_t param_nbytes(const GroupState& g) const override;
  std::vector<int> begin_user_gather(std::vector<GroupState>& groups, const std::vector<at::Tensor>& params) override;
  void end_user_gather(std::vector<GroupState>& groups, const std::vector<int>& token,
                       std::optional<int> modifier_rank) override;

  // The unit hooks (through a forwarding object the Sharded modules hold).
  void pre_forward(int unit);
  void post_forward(int unit);
  void pre_backward(int unit);

  int64_t param_disk_nbytes() const override { return swap_ ? swap_->disk_nbytes() : 0; }
  int64_t gathered_peak_nbytes() const override {
    return peak_gathered_numel_ * static_cast<int64_t>(c10::elementSize(ctx_.dtypes.model));
  }

 protected:
  void init_master(GroupState& g) override;
  void refresh_master(GroupState& g) override;

 private:
  struct GroupStore {
    partition::GroupLayout layout;     // a copy of the group's
    at::Tensor param_shard;            // (shard_numel,) model dtype; in fp32 the master itself; unset when swapped
    std::vector<at::Tensor> full;      // per bucket: (bucket numel,) model dtype, storage freed when released
    std::vector<int> unit_of_bucket;
    std::vector<int> unit_of_param;
  };
  struct UnitState {
    std::vector<std::pair<std::size_t, std::size_t>> buckets;   // (group, bucket) it owns
    int64_t numel = 0;
    int trainable = 0;       // its parameters in the engine's groups
    int pending = 0;         // this backward: those whose gradient has not come
    int active = 0;          // forwards in progress that use it
    bool gathered = false;   // its memory is allocated (and filled, or being filled by `inflight`)
    // Its backward has begun and not all its gradients are in: a forward run again meanwhile
    // (activation checkpointing recomputes inside backward) must not release it.
    bool in_backward = false;
    std::size_t entered_at = kNoEvent;   // the event of its forward in progress, if following the trace
    std::vector<comm::Work> inflight;   // a prefetch's all-gathers, not yet waited for
    std::vector<ParamSwap::Pending> reads;   // offload_param nvme: its chunks being read from disk
    std::vector<at::Tensor> inputs;          // the chunks the all-gathers read, alive until waited
  };
  // The units each event of a micro-step uses (forward entries, then backward entries),
  // recorded in the first training micro-step; later ones gather ahead and keep units for
  // reuse by its schedule while they follow it.
  struct Trace {
    std::vector<int> recorded;   // the unit each event entered
    bool recording = true;
    bool valid = true;
    bool warned = false;
    std::size_t next = 0;        // the next event expected
    UnitSchedule schedule;
    std::vector<std::size_t> wanted_at;   // by unit: UnitSchedule::prefetch's marks
  };
  static constexpr std::size_t kNoEvent = static_cast<std::size_t>(-1);
  class Hooks;

  void gather(int unit);
  // Every rank's chunks of the unit into its full buffers (memory allocated), not waited
  // for; `chunks`: this rank's, per bucket of the unit (shard_chunks).
  std::vector<comm::Work> all_gather_into_full(const UnitState& u, const std::vector<at::Tensor>& chunks);
  // This rank's chunk of each bucket of `u`: views of the parameter shard, or read from disk.
  std::vector<at::Tensor> shard_chunks(const UnitState& u);
  void start_gather(int unit);   // launches the all-gathers; gather() or release() waits
  void finish_gather(int unit);
  void release(int unit);
  // The event `unit` entering is in the trace (kNoEvent when recording or off the trace);
  // launches the gathers its schedule says come next.
  std::size_t follow_trace(int unit);
  void end_trace_step();
  void leave_trace();   // off the trace until the micro-step ends (warns once)
  void gradient_done(std::size_t group, std::size_t param);
  // The master weights (and a 16-bit parameter shard) of bucket `bucket` of `group` from its
  // full parameters.
  void shard_from_full(at::Tensor& master, std::size_t group, std::size_t bucket);
  // Parameter `param`'s values into `flat` from its ZeroInit chunks; false if it has none.
  bool place_presharded(const at::Tensor& param, const at::Tensor& flat);

  Stage3Options options_;
  ParamSwap* swap_ = nullptr;   // offload_param nvme (owned by the context)
  UnitMap map_;
  std::vector<UnitState> units_;
  std::vector<GroupStore> stores_;
  std::shared_ptr<Hooks> hooks_;
  // Parameters cut by ZeroInit, until placed: where their chunk is.
  std::vector<std::shared_ptr<PreSharded>> presharded_;
  std::unordered_map<const c10::TensorImpl*, PreShard*> preshard_of_;
  Trace trace_;
  int64_t gathered_numel_ = 0;
  int64_t peak_gathered_numel_ = 0;
};

}  // namespace zerotrain::stages::stage3
