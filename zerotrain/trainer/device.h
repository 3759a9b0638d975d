// Which device a rank trains on (`--device`), and what the device's memory allocator holds.
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace zerotrain::trainer {

// The spellings --device takes: "auto" (cuda when a GPU is visible, else cpu), "cpu",
// "cuda" (the GPU LOCAL_RANK names) and "cuda:N" (GPU N for every rank of the node: ranks
// sharing one GPU, which gloo allows and NCCL refuses). Throws UsageError naming the value.
void check_device_flag(const std::string& flag, const std::string& origin = "--device");

struct DeviceRequest {
  std::string flag = "auto";
  std::string origin = "--device";   // where the flag came from, in messages (ZEROTRAIN_DEVICE for Python)
  int local_rank = 0;          // LOCAL_RANK
  int local_world_size = 1;    // ranks on this node
  bool nccl = false;           // the comm backend is nccl: one GPU per rank
};

struct DeviceChoice {
  c10::Device device{c10::kCPU};
  std::string reason;          // for the start-up log: "cuda:1 (LOCAL_RANK 1 of 2 GPUs)"
  bool shares_gpu = false;     // cuda:N with several ranks on the node: NCCL cannot serve them
};

// Resolves the request against the GPUs this process sees. Throws UsageError when --device
// asks for a GPU that is not there (none visible, LOCAL_RANK beyond the count, cuda:N beyond
// it, or two nccl ranks on one GPU), naming the numbers and the fix. Does not change the
// current device: make_current() does.
DeviceChoice choose_device(const DeviceRequest& request);
void make_current(c10::Device device);

// The caching allocator's bytes on `device` (CUDA): now and the peak since the process
// started. nullopt for CPU.
struct DeviceMemory {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
std::optional<DeviceMemory> device_memory(c10::Device device);

}  // namespace zerotrain::trainer
