#include "tools/launch/reaper.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "zerotrain/core/error.h"

namespace zerotrain::launch {
namespace {

// The parent of process `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may
// hold spaces and parentheses, so the fields are read after its last ')'). -1 if gone.
pid_t parent_of(const char* pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%s/stat", pid);
  FILE* file = std::fopen(path, "re");
  if (file == nullptr) return -1;
  char buffer[1024];
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  buffer[n] = '\0';
  const std::string stat(buffer);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  return static_cast<pid_t>(std::atol(stat.c_str() + close + 4));   // ") S ppid"
}

// Every process below `root` (children, their children, ...), from one pass over /proc.
std::vector<pid_t> descendants_of(pid_t root) {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc)) {
      if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
      children[parent_of(entry->d_name)].push_back(static_cast<pid_t>(std::atol(entry->d_name)));
    }
    ::closedir(proc);
  }
  std::vector<pid_t> below;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    for (pid_t child : children[pid]) {
      below.push_back(child);
      todo.push_back(child);
    }
  }
  return below;
}

// Raises the soft RLIMIT_NOFILE to `needed` (never above the hard limit; children inherit
// it). Returns false when the limit stays below `needed`.
bool raise_descriptor_limit(long needed, long* soft_limit, long* hard_limit) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return true;   // nothing known: let it try
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < static_cast<rlim_t>(needed)) {
    rlimit raised = limit;
    raised.rlim_cur = (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= static_cast<rlim_t>(needed))
                          ? static_cast<rlim_t>(needed)
                          : limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  *soft_limit = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long>(limit.rlim_cur);
  *hard_limit = limit.rlim_max == RLIM_INFINITY ? -1 : static_cast<long>(limit.rlim_max);
  return limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= static_cast<rlim_t>(needed);
}

long open_descriptors() {
  long count = 0;
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return 64;   // a guess that errs high
  while (const dirent* entry = ::readdir(fds)) count += entry->d_name[0] != '.';
  ::closedir(fds);
  return count;
}

}  // namespace

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

void kill_and_reap_descendants() {
  const auto give_up_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    // All of them at once: a process killed before its children would orphan them onto us
    // while we might already have found nothing left to reap.
    const std::vector<pid_t> below = descendants_of(::getpid());
    for (pid_t pid : below) ::kill(pid, SIGKILL);
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (below.empty() && pid < 0 && errno == ECHILD) return;
    if (std::chrono::steady_clock::now() > give_up_at) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool is_ancestor(pid_t ancestor, pid_t pid) {
  for (int depth = 0; depth < 256 && pid > 1; ++depth) {
    pid = parent_of(std::to_string(pid).c_str());
    if (pid == ancestor) return true;
  }
  return false;
}

// A launch that runs out of descriptors half-way fails after starting part of its ranks,
// and mpirun then hangs (ORTE_ERROR_LOG, no exit). So the limit is raised as far as needed
// before anything starts, or the launch is refused.
void reserve_descriptors(int64_t children, bool log_files, int64_t child_needs, int64_t processes) {
  const int64_t needed = std::max<int64_t>(open_descriptors() + 16 + (log_files ? 3 : 2) * children, child_needs);
  long soft = 0, hard = 0;
  if (raise_descriptor_limit(static_cast<long>(needed), &soft, &hard)) return;
  // An unlimited hard limit still stops at the kernel's fs.nr_open.
  const std::string limit = hard >= 0 ? detail::str("the hard limit of `ulimit -n` here is ", hard)
                                      : "the kernel allows fewer (/proc/sys/fs/nr_open)";
  throw UsageError(detail::str(
      "starting ", processes, processes == 1 ? " process" : " processes", " needs about ", needed, " open files, but ",
      limit, ". Raise it (as root: `ulimit -Hn ", needed,
      "`, the nofile entry of /etc/security/limits.conf, or LimitNOFILE= in a systemd unit), or start fewer ranks "
      "on this node"));
}

}  // namespace zerotrain::launch
