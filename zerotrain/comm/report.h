// What this build's communication layer offers, for `zerotrain report`.
#pragma once

#include <string>
#include <vector>

namespace zerotrain::comm {

struct BackendReport {
  std::string name;                    // "gloo"
  std::string status;                  // "yes", "not built (...)", "compiled (NCCL 2.28.9 loaded); ..."
  std::vector<std::string> composed;   // what the Communicator builds from other collectives
};

std::vector<BackendReport> backend_reports();

// The version of the NCCL library this process loaded ("2.28.9"), asked of NCCL itself at
// run time; empty when this zerotrain was built without NCCL.
std::string nccl_version();

// The nccl backend's report line for a build with NCCL `version` on a machine where
// `visible_gpus` GPUs are visible (backend_reports() passes what it measures).
std::string nccl_status(const std::string& version, int visible_gpus);

}  // namespace zerotrain::comm
