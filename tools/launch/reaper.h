// Leaving no process behind: the launcher becomes the reaper of everything its children
// leave when they die, and kills and reaps all of it before it returns.
#pragma once

#include <sys/types.h>

namespace zerotrain::launch {

// PR_SET_CHILD_SUBREAPER: a process orphaned below us (mpirun's ranks when mpirun dies, a
// rank's own children, a daemon a rank started) becomes our child instead of init's, so
// that kill_and_reap_descendants() finds it.
void become_subreaper();

// SIGKILLs every process below this one (children, grandchildren, ...), reaps what becomes
// ours, and goes on until none is left. Gives up after 10 s on a process that cannot die
// (stuck in the kernel).
void kill_and_reap_descendants();

// Open files needed: raises the soft RLIMIT_NOFILE to `needed` (never above the hard
// limit; children inherit it). Returns false when the hard limit is below `needed`.
bool raise_descriptor_limit(long needed, long* soft_limit, long* hard_limit);

// The descriptors this process has open now.
long open_descriptors();

// Whether `ancestor` is the parent of `pid`, or its parent's parent, and so on (/proc).
bool is_ancestor(pid_t ancestor, pid_t pid);

}  // namespace zerotrain::launch
