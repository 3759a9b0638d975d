// The job token: which job a rendezvous store belongs to. `zerotrain launch` gives every rank
// of a job the same random ZEROTRAIN_JOB_TOKEN; rank 0 writes its token into the store it
// serves, and every other rank compares its own with it before it writes anything there.
// So a rank of another job that reaches this job's MASTER_ADDR:MASTER_PORT (two jobs given
// the same port, a node started with the wrong --master_addr) stops with a CommError instead
// of taking a place in this job's rendezvous. It is not authentication: the store has none,
// and anyone who can connect can read the token (docs/launch.md, "Network exposure").
// Internal to comm/.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace zerotrain::comm::detail {

inline constexpr const char* kJobTokenVariable = "ZEROTRAIN_JOB_TOKEN";

// Rank 0 publishes this process's token (or that it has none); the others wait up to
// `timeout` for it and compare. Throws CommError when they differ, TimeoutError when rank 0
// does not publish it in time.
void check_job_token(c10d::Store& store, int rank, std::chrono::milliseconds timeout);

}  // namespace zerotrain::comm::detail
