// A rank that misbehaves on purpose, for the launcher's fault tests:
//   fault_rank MODE VICTIM
// Every rank joins the world and all-reduces once; then rank VICTIM does MODE while the
// others all-reduce again (and so wait for it):
//   exit      exits with code 3
//   kill      kills itself with SIGKILL
//   stuck     sleeps forever instead of joining the collective
//   stubborn  ignores SIGTERM and sleeps forever (the launcher must SIGKILL it)
//   mismatch  all-reduces 17 elements where the others all-reduce 16 (run it with
//             ZEROTRAIN_COMM_DEBUG=1: every rank must fail with a fingerprint mismatch)
//   late      sleeps before joining the world (the others time out at start-up)
//   slow      sleeps 3 s before joining the world, and every rank 3 s after it, then behaves
//             (a job that holds its rendezvous store, then its links, open for a while)
//   ok        behaves
#include <ATen/ATen.h>

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/error.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: fault_rank exit|kill|stuck|stubborn|mismatch|late|slow|ok VICTIM" << std::endl;
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::stoi(argv[2]);
  try {
    if (mode == "late" && zerotrain::comm::rendezvous_from_env().rank == victim) {
      std::cout << "rank " << victim << " is stuck" << std::endl;
      while (true) ::pause();
    }
    const bool slow = mode == "slow";
    if (slow && zerotrain::comm::rendezvous_from_env().rank == victim) ::sleep(3);
    auto c = zerotrain::comm::Communicator::init();
    auto t = at::ones({16});
    c.all_reduce(t).wait();
    std::cout << "rank " << c.rank() << " joined" << std::endl;
    if (slow) ::sleep(3);
    if (c.rank() == victim) {
      if (mode == "exit") return 3;
      if (mode == "kill") ::raise(SIGKILL);
      if (mode == "stubborn") ::signal(SIGTERM, SIG_IGN);
      if (mode == "stuck" || mode == "stubborn") {
        std::cout << "rank " << c.rank() << " is stuck" << std::endl;
        while (true) ::pause();
      }
    }
    if (c.rank() == victim && mode == "mismatch") t = at::ones({17});
    c.all_reduce(t).wait();
    c.barrier().wait();
    return 0;
  } catch (const zerotrain::Error& e) {
    std::cerr << e.what() << std::endl;
    return e.exit_code();
  }
}
