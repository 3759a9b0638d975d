// The Backend over shared memory that comm/shm/ builds for the Communicator: the ranks of each
// host talk over a LocalGroup (local_group.h), one rank per host over the job's own transport.
// Internal to comm/.
#pragma once

#include <memory>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// Over `world`: ranks that share a host talk over shared memory, one rank per host crosses
// `world`'s transport. Returns `world` itself when no two ranks share a host, unless
// `required` (comm.backend "shm"), which then throws ConfigError.
std::unique_ptr<Backend> make_shm_backend(std::unique_ptr<Backend> world, const CommOptions& options, bool required);

}  // namespace zerotrain::comm::detail
