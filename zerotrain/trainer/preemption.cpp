#include "zerotrain/trainer/preemption.h"

#include <ATen/ATen.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/error.h"

namespace zerotrain::trainer {
namespace {

constexpr int kWatched[] = {SIGTERM, SIGUSR1};

// Written by the handler: lock-free atomics are async-signal-safe.
std::atomic<int> g_received{0};
std::atomic<bool> g_saved{false};
// Watches in this process (a thread world runs each rank's Trainer in one): the first
// installs the handlers, the last puts the previous ones back.
std::mutex g_mutex;
int g_watches = 0;
struct sigaction g_previous[std::size(kWatched)];

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

void on_signal(int signo) {
  if (g_saved.load()) return;
  int none = 0;
  if (g_received.compare_exchange_strong(none, signo)) return;
  // A second signal: the default action (for both, ending the process), at once.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  ::sigemptyset(&fallback.sa_mask);
  ::sigaction(signo, &fallback, nullptr);
  ::raise(signo);
}

}  // namespace

SignalWatch::SignalWatch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_watches++ > 0) return;
  g_received = 0;
  g_saved = false;
  struct sigaction action {};
  action.sa_handler = on_signal;
  ::sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;   // a read or write the signal interrupts goes on
  for (size_t i = 0; i < std::size(kWatched); ++i) ::sigaction(kWatched[i], &action, &g_previous[i]);
}

SignalWatch::~SignalWatch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_watches > 0) return;
  for (size_t i = 0; i < std::size(kWatched); ++i) ::sigaction(kWatched[i], &g_previous[i], nullptr);
}

int SignalWatch::received() const { return g_received.load(); }

void SignalWatch::save_finished() { g_saved = true; }

int agreed_signal(comm::Communicator& comm, int mine) {
  // The max of -signo over ranks is the lowest signal received; 0 wins only if none was.
  const int64_t key = mine == 0 ? INT64_MIN : -static_cast<int64_t>(mine);
  at::Tensor t = at::tensor({key}, at::kLong);
  comm.all_reduce(t, comm::ReduceOp::kMax).wait();
  const int64_t agreed = t.item<int64_t>();
  return agreed == INT64_MIN ? 0 : static_cast<int>(-agreed);
}

const char* signal_name(int signo) {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace zerotrain::trainer
