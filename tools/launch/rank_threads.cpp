#include "tools/launch/rank_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::launch {
namespace {

// "QUOTA PERIOD" in microseconds, or "max PERIOD" for none, in the cgroup v2 file of this
// process's group. Only that group's file is read: a quota set on a parent group goes
// unseen, and the count then errs high, as it would without this check.
std::optional<int> cgroup_quota_cpus() {
  std::ifstream groups("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(groups, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);  // the v2 hierarchy's entry
  }
  if (path.empty()) return std::nullopt;
  std::ifstream file("/sys/fs/cgroup" + path + "/cpu.max");
  std::string quota;
  double period_us = 0;
  if (!(file >> quota >> period_us) || quota == "max" || period_us <= 0) return std::nullopt;
  try {
    return std::max(1, static_cast<int>(std::ceil(std::stod(quota) / period_us)));
  } catch (const std::exception&) {
    return std::nullopt;  // a file this does not understand limits nothing
  }
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cpus <= 0) cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  if (auto quota = cgroup_quota_cpus()) cpus = std::min(cpus, *quota);
  return std::max(1, cpus);
}

std::optional<std::string> omp_threads_per_rank(int ranks_on_host) {
  if (ranks_on_host <= 1 || env::get("OMP_NUM_THREADS").has_value()) return std::nullopt;
  return std::to_string(std::max(1, usable_cpus() / ranks_on_host));
}

std::string omp_threads_notice(const std::string& threads, int ranks_on_host) {
  return detail::str("zerotrain launch: OMP_NUM_THREADS=", threads, " for each of the ", ranks_on_host,
                     " ranks on this host (", usable_cpus(),
                     " usable CPUs shared); set OMP_NUM_THREADS to choose another count");
}

}  // namespace zerotrain::launch
