#include "zerotrain/comm/report.h"

#include <torch/cuda.h>

#include "zerotrain/comm/mpi/mpi_backend.h"

namespace zerotrain::comm {

std::string nccl_status(const std::string& version, int visible_gpus) {
  if (version.empty()) return "not built (this LibTorch has no CUDA half, or NCCL was not found at configure time)";
  const std::string built = "compiled (NCCL " + version + " loaded); ";
  if (visible_gpus <= 0) return built + "untested on this machine: no GPU visible";
  return built + std::to_string(visible_gpus) + (visible_gpus == 1 ? " GPU" : " GPUs") + " visible";
}

// Keep in step with each backend's reduces()/averages() and with docs/comm.md.
std::vector<BackendReport> backend_reports() {
  const std::string uneven = "reduce_scatter/all_gather of sizes the world size does not divide (padded)";
  const std::string integer_avg = "avg of integer tensors (sum, then divide)";
  std::vector<BackendReport> reports;
  reports.push_back({"threads", "yes (in-process ranks, for tests)", {}});
  reports.push_back({"shm", "yes (between the ranks of each host, under auto, gloo and mpi; ZEROTRAIN_SHM=0 turns it "
                     "off)", {"across hosts: avg (sum, then divide), reduce_scatter (an all_reduce, then the chunk)",
                              "dtypes other than fp32/fp64/fp16/bf16/int8/uint8/int32/int64 (in fp32)", uneven}});
  reports.push_back({"gloo", "yes", {integer_avg, uneven}});
  if (detail::mpi_compiled()) {
    reports.push_back({"mpi", "yes (OpenMPI; default under mpirun and for `zerotrain launch` hostfile jobs)",
                       {"fp16/bf16 reductions (in fp32)", "avg (sum, then divide)", uneven}});
  } else {
    reports.push_back({"mpi", "not built (install libopenmpi-dev and rebuild)", {}});
  }
  const std::string version = nccl_version();
  const int gpus = version.empty() ? 0 : static_cast<int>(torch::cuda::device_count());
  reports.push_back({"nccl", nccl_status(version, gpus), version.empty() ? std::vector<std::string>{}
                                                                          : std::vector<std::string>{integer_avg, uneven}});
  return reports;
}

}  // namespace zerotrain::comm
