// Leaving no process behind: the launcher becomes the reaper of everything its children
// leave when they die, and kills and reaps all of it before it returns. And room for every
// child: the open files a launch needs, checked before anything starts.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace zerotrain::launch {

// PR_SET_CHILD_SUBREAPER: a process orphaned below us (mpirun's ranks when mpirun dies, a
// rank's own children, a daemon a rank started) becomes our child instead of init's, so
// that kill_and_reap_descendants() finds it.
void become_subreaper();

// SIGKILLs every process below this one (children, grandchildren, ...), reaps what becomes
// ours, and goes on until none is left. Gives up after 10 s on a process that cannot die
// (stuck in the kernel).
void kill_and_reap_descendants();

// Makes sure the launcher can start `children` children: two pipes each here (and a log
// file with `log_files`), and `child_needs` open files in any one child, which inherits our
// limit (mpirun: about 4 per rank). Raises the soft RLIMIT_NOFILE as far as needed (never
// above the hard limit), or throws UsageError naming the limit and the fix; `processes`
// counts them for the message. supervise() checks its children; plan_launch checks a count
// before it builds the plan.
void reserve_descriptors(int64_t children, bool log_files, int64_t child_needs, int64_t processes);

// Whether `ancestor` is the parent of `pid`, or its parent's parent, and so on (/proc).
bool is_ancestor(pid_t ancestor, pid_t pid);

}  // namespace zerotrain::launch
