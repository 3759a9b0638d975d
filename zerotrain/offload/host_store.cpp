// offload_optimizer.device "cpu": the states stay in host memory. On a machine without a
// GPU that is where they were anyway; what changes is the step (the fused sub-group pass
// of optimizer_offload.cpp). With a GPU and pin_memory they are page-locked, for copies
// that do not stage through a bounce buffer.
#include <ATen/ATen.h>

#include <cstring>
#include <ATen/Context.h>

#include "zerotrain/core/error.h"
#include "zerotrain/offload/state_store.h"

namespace zerotrain::offload {
namespace {

class HostStore final : public StateStore {
 public:
  explicit HostStore(bool pin_memory) : pin_(pin_memory && at::globalContext().hasCUDA()) {}

  void add_group(std::size_t group, int64_t numel, const MasterFill& fill) override {
    ZT_INTERNAL_ASSERT(group == groups_.size(), "offload groups added out of order");
    auto options = at::TensorOptions().dtype(at::kFloat).pinned_memory(pin_);
    GroupStates s{at::empty({numel}, options), at::zeros({numel}, options), at::zeros({numel}, options)};
    fill(0, numel, s.master.data_ptr<float>());
    groups_.push_back(std::move(s));
  }

  void begin_pass(std::vector<SubGroup> order) override { order_ = std::move(order); }
  SubGroupArrays acquire(std::size_t k) override {
    const SubGroup& sg = order_.at(k);
    GroupStates& s = groups_.at(sg.group);
    return {s.master.data_ptr<float>() + sg.offset, s.exp_avg.data_ptr<float>() + sg.offset,
            s.exp_avg_sq.data_ptr<float>() + sg.offset};
  }
  void release(std::size_t) override {}
  void release_unchanged(std::size_t) override {}
  void finish_pass() override {}

  GroupStates read_group(std::size_t group) override { return groups_.at(group); }
  void write_group(std::size_t group, const GroupStates& states) override {
    GroupStates& s = groups_.at(group);
    if (!states.master.is_same(s.master)) s.master.copy_(states.master);
    if (!states.exp_avg.is_same(s.exp_avg)) s.exp_avg.copy_(states.exp_avg);
    if (!states.exp_avg_sq.is_same(s.exp_avg_sq)) s.exp_avg_sq.copy_(states.exp_avg_sq);
  }
  bool resident() const override { return true; }
  void read_range(std::size_t group, int which, int64_t offset, int64_t numel, float* out) override {
    const GroupStates& s = groups_.at(group);
    const at::Tensor& t = which == 0 ? s.master : which == 1 ? s.exp_avg : s.exp_avg_sq;
    std::memcpy(out, t.data_ptr<float>() + offset, static_cast<size_t>(numel) * sizeof(float));
  }

  void write_range(std::size_t group, int which, int64_t offset, int64_t numel, const float* in) override {
    const GroupStates& s = groups_.at(group);
    const at::Tensor& t = which == 0 ? s.master : which == 1 ? s.exp_avg : s.exp_avg_sq;
    std::memcpy(t.data_ptr<float>() + offset, in, static_cast<size_t>(numel) * sizeof(float));
  }
  void flush_writes() override {}

  int64_t host_nbytes() const override {
    int64_t total = 0;
    for (const auto& s : groups_) total += static_cast<int64_t>(s.master.nbytes() * 3);
    return total;
  }
  int64_t disk_nbytes() const override { return 0; }
  std::string describe() const override { return pin_ ? "host memory (pinned)" : "host memory"; }

 private:
  bool pin_;
  std::vector<GroupStates> groups_;
  std::vector<SubGroup> order_;
};

}  // namespace

std::unique_ptr<StateStore> make_host_store(bool pin_memory) { return std::make_unique<HostStore>(pin_memory); }

}  // namespace zerotrain::offload
