// The signal watch of --save_on_signal: the first SIGTERM or SIGUSR1 is recorded, a second
// ends the process as the signal's default does, and once the save is done signals are
// ignored; the ranks agree on the signal over real collectives (a thread world).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <memory>
#include <thread>
#include <tuple>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/trainer/preemption.h"

namespace {

using zerotrain::trainer::SignalWatch;

// The status of a forked child that runs `body` and exits 0 if it returns.
int status_of_child(const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(SignalWatch, TheFirstSignalIsRecordedAndTheSecondEndsTheProcess) {
  for (int signo : {SIGTERM, SIGUSR1}) {
    const int status = status_of_child([signo] {
      SignalWatch watch;
      if (watch.received() != 0) ::_exit(2);
      ::raise(signo);
      if (watch.received() != signo) ::_exit(3);
      ::raise(signo);   // the save is not finished: this ends the process
      ::_exit(4);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << signo << ": the child exited " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), signo);
  }
}

TEST(SignalWatch, SignalsAfterTheSaveAreIgnored) {
  const int status = status_of_child([] {
    SignalWatch watch;
    ::raise(SIGTERM);
    watch.save_finished();
    ::raise(SIGTERM);
    ::raise(SIGUSR1);
    if (watch.received() != SIGTERM) ::_exit(3);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SignalWatch, TheHandlersBeforeItComeBack) {
  const int status = status_of_child([] {
    { SignalWatch watch; }
    ::raise(SIGUSR1);   // the default again: the process ends
    ::_exit(5);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGUSR1);
}

// Ranks in threads of one process each hold a watch: they share the handlers and the signal.
TEST(SignalWatch, WatchesInOneProcessShareTheSignal) {
  const int status = status_of_child([] {
    auto first = std::make_unique<SignalWatch>();
    SignalWatch second;
    ::raise(SIGUSR1);
    if (first->received() != SIGUSR1 || second.received() != SIGUSR1) ::_exit(3);
    first.reset();      // the handlers stay while a watch remains
    second.save_finished();
    ::raise(SIGUSR1);   // ignored after the save
    if (second.received() != SIGUSR1) ::_exit(4);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SignalWatch, EveryRankLearnsTheSignalOneRankGot) {
  for (const auto& [mine0, mine1, agreed] : {std::tuple{0, 0, 0}, std::tuple{0, SIGUSR1, SIGUSR1},
                                             std::tuple{SIGTERM, 0, SIGTERM}, std::tuple{SIGTERM, SIGUSR1, SIGUSR1}}) {
    auto world = zerotrain::comm::Communicator::make_thread_world(2);
    int got[2] = {-1, -1};
    std::thread other([&, m = mine1] { got[1] = zerotrain::trainer::agreed_signal(world[1], m); });
    got[0] = zerotrain::trainer::agreed_signal(world[0], mine0);
    other.join();
    EXPECT_EQ(got[0], agreed);
    EXPECT_EQ(got[1], agreed);
  }
}

}  // namespace
