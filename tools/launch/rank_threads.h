// The threads each rank's LibTorch and OpenMP use when the user did not choose: this host's
// usable CPUs shared among its ranks. Left alone, every rank starts one thread per core, so
// N ranks run N times as many threads as there are cores, and OpenMP's threads, which spin
// while they wait for each other, then wait on threads that are not running: measured on a
// 16-core host, two ranks of a small GPT trained 13 samples/s that way, 1675 with 8 threads each.
// torchrun sets 1 thread per rank in this case; a share of the cores keeps a CPU rank's
// matrix products parallel.
#pragma once

#include <optional>
#include <string>

namespace zerotrain::launch {

// CPUs this process may run on: its affinity mask, lowered by a cgroup CPU quota (cpu.max
// of cgroup v2, as containers set it). At least 1.
int usable_cpus();

// The OMP_NUM_THREADS value for each of 'ranks_on_host' ranks: usable_cpus() / ranks, at
// least 1. None where the user set OMP_NUM_THREADS (theirs wins) or where one rank runs on
// the host (it keeps LibTorch's own choice).
std::optional<std::string> omp_threads_per_rank(int ranks_on_host);

// A line for the launcher's stderr that says what omp_threads_per_rank chose and why.
std::string omp_threads_notice(const std::string& threads, int ranks_on_host);

}  // namespace zerotrain::launch
