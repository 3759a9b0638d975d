#include "zerotrain/comm/rendezvous/job_token.h"

#include <thread>

#include "zerotrain/comm/backend.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

using ::zerotrain::detail::str;

constexpr const char* kTokenKey = "zt/job_token";

// What this process writes or expects under kTokenKey. A job launched without a token (by
// torchrun, Slurm or a plain mpirun) meets as before, but never with ranks that have one.
std::string own_entry() {
  const std::string token = env::get(kJobTokenVariable).value_or("");
  return token.empty() ? "no token" : "token " + token;
}

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace

void check_job_token(c10d::Store& store, int rank, std::chrono::milliseconds timeout) {
  const std::string mine = own_entry();
  std::string theirs;
  try {
    if (rank == 0) {
      // Set it if nobody has (the store's first use in this job), else read what is there: a
      // store that torch.distributed or an earlier engine of this process opened holds ours.
      const auto held = store.compareSet(kTokenKey, {}, bytes_of(mine));
      theirs.assign(held.begin(), held.end());
    } else {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!store.check({kTokenKey})) {
        if (std::chrono::steady_clock::now() >= deadline) {
          throw TimeoutError(str("rank ", rank, " waited ", timeout.count() / 1000.0,
                                 " s for rank 0 to start; ranks that did not arrive: 0. Check that it started (its "
                                 "output), or raise ZEROTRAIN_COMM_TIMEOUT_S"));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const auto held = store.get(kTokenKey);
      theirs.assign(held.begin(), held.end());
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(str("rank ", rank, " lost the rendezvous store while checking which job it belongs to (",
                        first_line(e), "); rank 0, which serves it, has probably exited: see its output"),
                    "rendezvous");
  }
  if (theirs == mine) return;
  const bool i_have = mine != "no token";
  const bool they_have = theirs != "no token";
  throw CommError(
      str("rank ", rank, " reached a rendezvous store at MASTER_ADDR:MASTER_PORT that belongs to another job: ",
          i_have && they_have ? "its job token differs from this rank's ZEROTRAIN_JOB_TOKEN"
          : i_have            ? "that job has no job token, this rank has ZEROTRAIN_JOB_TOKEN"
                              : "that job has a job token, this rank has no ZEROTRAIN_JOB_TOKEN",
          ". A process of another job tried to join, or the ranks of this job were started apart: give each job "
          "its own --master_port, start the ranks of a job with one `zerotrain launch` (or the same "
          "ZEROTRAIN_JOB_TOKEN on every node), and check --master_addr"),
      "rendezvous");
}

}  // namespace zerotrain::comm::detail
