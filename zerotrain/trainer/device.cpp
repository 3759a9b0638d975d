#include "zerotrain/trainer/device.h"

#include <ATen/DeviceAccelerator.h>
#include <torch/cuda.h>

#include <charconv>

#include "zerotrain/core/error.h"

namespace zerotrain::trainer {
namespace {

// "cuda:N" -> N; nullopt for any other spelling.
std::optional<int> cuda_index(const std::string& flag) {
  const std::string prefix = "cuda:";
  if (flag.rfind(prefix, 0) != 0 || flag.size() == prefix.size()) return std::nullopt;
  int index = -1;
  const char* first = flag.data() + prefix.size();
  const char* last = flag.data() + flag.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last || index < 0) return std::nullopt;
  return index;
}

// The request as its user writes it: "--device cuda:0", or "ZEROTRAIN_DEVICE=cuda:0".
std::string spelled(const DeviceRequest& r, const std::string& value) {
  return r.origin.rfind("--", 0) == 0 ? r.origin + " " + value : r.origin + "=" + value;
}

std::string gpus(int64_t count) { return detail::str(count, count == 1 ? " GPU" : " GPUs"); }

}  // namespace

void check_device_flag(const std::string& flag, const std::string& origin) {
  ZT_CHECK(flag == "auto" || flag == "cpu" || flag == "cuda" || cuda_index(flag), UsageError, origin, " ", flag,
           ": not a device; use auto (a GPU when one is visible), cpu, cuda (the GPU LOCAL_RANK names) or cuda:N");
}

DeviceChoice choose_device(const DeviceRequest& r) {
  check_device_flag(r.flag, r.origin);
  if (r.flag == "cpu") return {c10::Device(c10::kCPU), detail::str("cpu (", r.origin, " cpu)")};
  const int64_t count = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  if (r.flag == "auto" && count == 0) return {c10::Device(c10::kCPU), "cpu (no GPU visible)"};
  ZT_CHECK(count > 0, UsageError, r.origin, " ", r.flag, ": no GPU is visible to this process (no NVIDIA driver, "
           "CUDA_VISIBLE_DEVICES hides them, or torch is a CPU build; `zerotrain report` says which); use ",
           spelled(r, "cpu"));
  if (const auto index = cuda_index(r.flag)) {
    ZT_CHECK(*index < count, UsageError, r.origin, " ", r.flag, ": this machine shows ", gpus(count),
             " (cuda:0 to cuda:", count - 1, ")");
    ZT_CHECK(!r.nccl || r.local_world_size == 1, UsageError, r.origin, " ", r.flag, " puts all ", r.local_world_size,
             " ranks of this node on one GPU, which NCCL refuses; use ", spelled(r, "cuda"), " (one GPU per rank) or the "
             "gloo backend to share a GPU");
    return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*index)), detail::str(r.flag, " (", r.origin, ")"),
            r.local_world_size > 1};
  }
  // "cuda" or "auto" with GPUs: the GPU LOCAL_RANK names.
  ZT_CHECK(r.local_rank < count, UsageError, "LOCAL_RANK ", r.local_rank, " has no GPU: this machine shows ",
           gpus(count), " and runs ", r.local_world_size, " ranks on it; start at most ", count,
           " ranks per node (--nproc_per_node ", count, "), or pass ", spelled(r, "cuda:0"), " with the gloo backend to "
           "share one GPU, or ", spelled(r, "cpu"));
  return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(r.local_rank)),
          detail::str("cuda:", r.local_rank, " (LOCAL_RANK ", r.local_rank, " of ", gpus(count), ")")};
}

void make_current(c10::Device device) {
  if (device.is_cuda()) at::accelerator::setDeviceIndex(device.index());
}

std::optional<DeviceMemory> device_memory(c10::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = at::accelerator::getDeviceStats(device.index());
  constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return DeviceMemory{.allocated_bytes = stats.allocated_bytes[all].current,
                      .reserved_bytes = stats.reserved_bytes[all].current,
                      .peak_allocated_bytes = stats.allocated_bytes[all].peak,
                      .peak_reserved_bytes = stats.reserved_bytes[all].peak};
}

}  // namespace zerotrain::trainer
