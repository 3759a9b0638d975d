#include "zerotrain/comm/report.h"

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm {

// Keep in step with each backend's reduces()/averages() and with docs/comm.md.
std::vector<BackendReport> backend_reports() {
  const std::string uneven = "reduce_scatter/all_gather of sizes the world size does not divide (padded)";
  std::vector<BackendReport> reports;
  reports.push_back({"threads", "yes (in-process ranks, for tests)", {}});
  reports.push_back({"gloo", "yes", {"avg of integer tensors (sum, then divide)", uneven}});
  if (detail::mpi_compiled()) {
    reports.push_back({"mpi", "yes (OpenMPI; default under mpirun and `zerotrain launch`)",
                       {"fp16/bf16 reductions (in fp32)", "avg (sum, then divide)", uneven}});
  } else {
    reports.push_back({"mpi", "not built (install libopenmpi-dev and rebuild)", {}});
  }
  if (detail::nccl_compiled()) {
    reports.push_back({"nccl", "compiled, untested (no GPU where it was built)", {uneven}});
  } else {
    reports.push_back({"nccl", "not built (no CUDA toolkit with NCCL)", {}});
  }
  return reports;
}

}  // namespace zerotrain::comm
