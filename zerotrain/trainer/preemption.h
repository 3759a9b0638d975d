// Saving on a signal (--save_on_signal, docs/checkpoints.md "Preemption"): SIGTERM or SIGUSR1
// asks the run to stop. The handler only records the signal; the training loop asks every
// rank after each optimizer step (agreed_signal, a collective), so all ranks stop after the
// same step, save one checkpoint and exit 143. A second signal to a rank that already has
// one ends that rank at once, as the signal's default would: a save in progress is then
// abandoned and the previous checkpoint stays the one `latest` names.
#pragma once

namespace zerotrain::comm {
class Communicator;
}

namespace zerotrain::trainer {

class SignalWatch {
 public:
  // Installs the handlers for SIGTERM and SIGUSR1; the destructor restores the ones before.
  // Watches at once in one process (ranks in threads) share the handlers and what they
  // received: the first installs them, the last restores.
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The first signal this process received since the watch began, or 0.
  int received() const;
  // The save on a signal has finished: from now a further signal is ignored (the rank is
  // about to exit 143, and the launcher may signal it while it does).
  void save_finished();
};

// The signal some rank received, agreed by all ranks (a collective): the lowest number among
// those received, or 0 when none did.
int agreed_signal(comm::Communicator& comm, int mine);

// "SIGTERM", "SIGUSR1", ...
const char* signal_name(int signo);

}  // namespace zerotrain::trainer
