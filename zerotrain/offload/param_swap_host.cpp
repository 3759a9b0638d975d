#include "zerotrain/offload/param_swap_host.h"

#include <ATen/ATen.h>

#include <map>
#include <vector>

#include "zerotrain/core/error.h"

namespace zerotrain::offload {
namespace {

class HostParamSwap final : public stages::stage3::ParamSwap {
 public:
  explicit HostParamSwap(c10::Device device) : device_(device) {}

  void add_group(std::size_t group, const std::vector<int64_t>& chunk_numels, at::ScalarType dtype) override {
    ZT_INTERNAL_ASSERT(group == chunks_.size(), "param swap groups are added in order");
    auto& chunks = chunks_.emplace_back();
    // Pinned, so that uploads are asynchronous (and pinning needs the GPU's runtime).
    for (int64_t n : chunk_numels) {
      chunks.push_back(at::empty({n}, at::TensorOptions(dtype).pinned_memory(device_.is_cuda())));
    }
  }

  void write(std::size_t group, std::size_t bucket, const at::Tensor& chunk) override {
    // Blocking: the caller may free or rewrite its chunk as soon as this returns.
    chunks_.at(group).at(bucket).copy_(chunk.reshape({-1}));
  }

  Pending start_read(std::size_t group, std::size_t bucket) override {
    const at::Tensor& host = chunks_.at(group).at(bucket);
    at::Tensor on_device = at::empty({host.numel()}, host.options().pinned_memory(false).device(device_));
    // Asynchronous from pinned memory, queued on the current stream: the gather that reads it
    // is queued after it, and the host chunk is not written again before the next step.
    on_device.copy_(host, /*non_blocking=*/true);
    const Pending id = next_++;
    in_flight_.emplace(id, std::move(on_device));
    return id;
  }

  at::Tensor finish_read(Pending pending) override {
    auto it = in_flight_.find(pending);
    ZT_INTERNAL_ASSERT(it != in_flight_.end(), "finish_read of a read never started");
    at::Tensor out = std::move(it->second);
    in_flight_.erase(it);
    return out;
  }

  int64_t disk_nbytes() const override { return 0; }

  std::string describe() const override {
    int64_t bytes = 0;
    for (const auto& g : chunks_) {
      for (const auto& c : g) bytes += static_cast<int64_t>(c.nbytes());
    }
    return ::zerotrain::detail::str("parameter shard in pinned host memory (", bytes >> 20, " MiB), uploaded to ",
                                    device_.str(), " a unit at a time");
  }

 private:
  c10::Device device_;
  std::vector<std::vector<at::Tensor>> chunks_;
  std::map<Pending, at::Tensor> in_flight_;
  Pending next_ = 0;
};

}  // namespace

std::unique_ptr<stages::stage3::ParamSwap> make_host_param_swap(c10::Device device) {
  return std::make_unique<HostParamSwap>(device);
}

}  // namespace zerotrain::offload
