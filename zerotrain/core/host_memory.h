// How much memory this process may still take: the smaller of the kernel's MemAvailable and
// what the process's cgroup (v2 or v1) has left below its limit. Containers and Slurm jobs
// limit memory through the cgroup, so MemAvailable alone can promise memory the job
// would be killed for using.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zerotrain::memory {

struct Available {
  int64_t bytes = 0;
  std::string source;   // "MemAvailable", "cgroup memory.max", ... for messages
};

// nullopt when nothing can be read (no /proc/meminfo). ZEROTRAIN_MEMORY_AVAILABLE (a size:
// "16GiB") overrides what is read, for a job that shares the machine with others.
std::optional<Available> available();

}  // namespace zerotrain::memory
