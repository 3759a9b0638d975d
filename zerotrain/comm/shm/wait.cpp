#include "zerotrain/comm/shm/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <thread>

#include "zerotrain/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZEROTRAIN_SHM_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define ZEROTRAIN_SHM_PAUSE() asm volatile("yield")
#else
#define ZEROTRAIN_SHM_PAUSE() ((void)0)
#endif

namespace zerotrain::comm::shm {
namespace {

using Clock = std::chrono::steady_clock;

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // Not FUTEX_PRIVATE_FLAG: the word is shared between processes. EAGAIN (the word moved),
  // EINTR and ETIMEDOUT all just send the caller back to its checks.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

bool process_exited(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) == -1 && errno == ESRCH) return true;
  // A zombie still answers kill(); its state in /proc says it has exited.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  const char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

Rendezvous::Rendezvous(const Segment& segment, int rank, const std::vector<int>& job_ranks, WaitOptions options)
    : segment_(segment),
      header_(segment.header()),
      rank_(rank),
      size_(segment.layout().size),
      job_ranks_(job_ranks),
      options_(options),
      arrived_(segment.line(rank).arrived.load(std::memory_order_relaxed)) {}

std::string Rendezvous::peer_label(int member) const {
  std::string label = member_label(member, job_ranks_);
  const int pid = header_.pids[member].load(std::memory_order_acquire);
  if (pid > 0) label += ", pid " + std::to_string(pid);
  return label;
}

bool Rendezvous::all_arrived(uint64_t target) const {
  for (int m = 0; m < size_; ++m) {
    if (segment_.line(m).arrived.load(std::memory_order_acquire) < target) return false;
  }
  return true;
}

void Rendezvous::wake_sleepers() {
  // seq_cst on both sides (here and in sleep_until_all) so that either this member sees the
  // sleeper's count, or the sleeper sees the bumped word (and its futex_wait returns at once).
  header_.futex_word.fetch_add(1, std::memory_order_seq_cst);
  if (header_.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&header_.futex_word);
}

void Rendezvous::arrive_and_wait(const char* what) {
  if (header_.broken.load(std::memory_order_acquire) != 0) throw_broken(what);
  const uint64_t target = ++arrived_;
  segment_.line(rank_).arrived.store(target, std::memory_order_seq_cst);
  wake_sleepers();
  if (all_arrived(target)) return;
  // Spin: the others are usually a few microseconds behind.
  const auto start = Clock::now();
  const auto spin_end = start + options_.spin;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      ZEROTRAIN_SHM_PAUSE();
      if (all_arrived(target)) return;
    }
    if (header_.broken.load(std::memory_order_acquire) != 0) throw_broken(what);
    if (Clock::now() >= spin_end) break;
  }
  // Yield: whoever waits for this core (perhaps the member we wait for) runs now.
  const auto yield_end = start + options_.yield;
  for (;;) {
    ::sched_yield();
    if (all_arrived(target)) return;
    if (header_.broken.load(std::memory_order_acquire) != 0) throw_broken(what);
    if (Clock::now() >= yield_end) break;
  }
  sleep_until_all(target, what);
}

void Rendezvous::sleep_until_all(uint64_t target, const char* what) {
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  auto next_liveness_check = start + options_.liveness_period;
  for (;;) {
    header_.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t word = header_.futex_word.load(std::memory_order_seq_cst);
    if (!all_arrived(target) && header_.broken.load(std::memory_order_seq_cst) == 0) {
      const auto now = Clock::now();
      futex_wait(&header_.futex_word, word, std::min<Clock::duration>(options_.sleep_slice, deadline - now));
    }
    header_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (all_arrived(target)) return;
    if (header_.broken.load(std::memory_order_acquire) != 0) throw_broken(what);
    const auto now = Clock::now();
    if (now >= next_liveness_check || now >= deadline) {
      next_liveness_check = now + options_.liveness_period;
      for (int m = 0; m < size_; ++m) {
        if (segment_.line(m).arrived.load(std::memory_order_acquire) >= target) continue;
        const int pid = header_.pids[m].load(std::memory_order_acquire);
        if (process_exited(pid)) {
          fail(BrokenKind::kComm, detail::str(peer_label(m), " exited while ", member_label(rank_, job_ranks_),
                                              " waited for it in ", what));
        }
      }
    }
    if (now >= deadline) {
      std::string late;
      for (int m = 0; m < size_; ++m) {
        if (segment_.line(m).arrived.load(std::memory_order_acquire) < target) {
          late += (late.empty() ? "" : ", ") + peer_label(m);
        }
      }
      fail(BrokenKind::kTimeout,
           detail::str(member_label(rank_, job_ranks_), " waited ", options_.timeout.count(), " ms in ", what,
                       " for ", late, " to arrive"));
    }
  }
}

std::string Rendezvous::shared_reason() const {
  // The member that broke the group writes its reason right after the flag: wait for it briefly.
  const auto until = Clock::now() + std::chrono::milliseconds(100);
  while (header_.reason_ready.load(std::memory_order_acquire) == 0) {
    if (Clock::now() >= until) return "another member failed";
    std::this_thread::yield();
  }
  return std::string(header_.reason, strnlen(header_.reason, sizeof header_.reason));
}

void Rendezvous::fail(BrokenKind kind, const std::string& reason) {
  uint32_t none = 0;
  if (header_.broken.compare_exchange_strong(none, static_cast<uint32_t>(kind), std::memory_order_acq_rel)) {
    const size_t n = std::min(reason.size(), sizeof header_.reason - 1);
    std::memcpy(header_.reason, reason.data(), n);
    header_.reason[n] = '\0';
    header_.reason_ready.store(1, std::memory_order_release);
  }
  wake_sleepers();
  if (kind == BrokenKind::kTimeout) throw TimeoutError("shared-memory group: " + reason);
  throw CommError("shared-memory group: " + reason);
}

void Rendezvous::throw_broken(const char* what) const {
  const auto kind = static_cast<BrokenKind>(header_.broken.load(std::memory_order_acquire));
  const std::string message = detail::str("shared-memory group: ", member_label(rank_, job_ranks_), " stops ",
                                          what, ": ", shared_reason());
  if (kind == BrokenKind::kTimeout) throw TimeoutError(message);
  throw CommError(message);
}

void Rendezvous::check_usable(const char* what) const {
  if (header_.broken.load(std::memory_order_acquire) == 0) return;
  throw CommError(detail::str("shared-memory group: ", member_label(rank_, job_ranks_), " cannot start ", what,
                              ": the group broke earlier: ", shared_reason()));
}

}  // namespace zerotrain::comm::shm
