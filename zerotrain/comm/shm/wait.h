// How the members of a LocalGroup wait for each other: per-member counters in the segment,
// a short spin, then a futex sleep in bounded slices so the waiter can notice a deadline, a
// peer that died, or a group another member declared broken.
//
// Why spin, yield and then sleep: a 1 KiB all_reduce costs about a microsecond of copying,
// so a sleep (tens of microseconds to wake) would dominate it; but ranks may outnumber cores,
// and a waiter that kept spinning would take the core the member it waits for needs. After
// two microseconds of spinning the waiter yields its core at every check: a peer queued on
// the same core runs at once (measured: two members sharing a core take ~10 us per 1 KiB
// all_reduce with a 5 us pure spin, the spins of both in turn).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/comm/shm/segment.h"

namespace zerotrain::comm::shm {

struct WaitOptions {
  std::chrono::milliseconds timeout{300'000};
  std::chrono::nanoseconds spin{2'000};                  // pause-spinning first
  std::chrono::nanoseconds yield{50'000};                // then sched_yield() until this, then sleep
  std::chrono::milliseconds sleep_slice{20};             // longest single futex sleep
  std::chrono::milliseconds liveness_period{100};        // how often a sleeper checks its peers exist
};

class Rendezvous {
 public:
  Rendezvous(const Segment& segment, int rank, const std::vector<int>& job_ranks, WaitOptions options);

  // Signals that this member reached its next wait and returns once every member has
  // reached it. Writes made before are visible to every member after (release/acquire).
  // Throws TimeoutError or CommError (and breaks the group) when that does not happen.
  void arrive_and_wait(const char* what);

  // Throws CommError when the group is broken: a collective that starts after a failure
  // fails at once on every member.
  void check_usable(const char* what) const;

 private:
  bool all_arrived(uint64_t target) const;
  void sleep_until_all(uint64_t target, const char* what);
  // Marks the group broken for every member (the first reason wins) and throws.
  [[noreturn]] void fail(BrokenKind kind, const std::string& reason);
  [[noreturn]] void throw_broken(const char* what) const;
  std::string shared_reason() const;
  std::string peer_label(int member) const;
  void wake_sleepers();

  const Segment& segment_;
  SegmentHeader& header_;
  const int rank_;
  const int size_;
  const std::vector<int> job_ranks_;
  const WaitOptions options_;
  uint64_t arrived_ = 0;   // this member's counter (mirrors its line in the segment)
};

// Whether process `pid` is gone (or a zombie: exited, not yet reaped by its parent).
bool process_exited(int pid);

}  // namespace zerotrain::comm::shm
