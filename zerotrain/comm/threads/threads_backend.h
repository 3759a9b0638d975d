// comm/threads/: the in-process transport, whose ranks are threads of one process.
// Internal to comm/: Communicator::make_thread_world and a world of one use it.
#pragma once

#include <memory>
#include <vector>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// One Backend per rank thread, all sharing one in-process world.
std::vector<std::unique_ptr<Backend>> make_thread_backends(int world_size, const CommOptions& options);
// The threads backend asked for by name (ZEROTRAIN_COMM_BACKEND=threads): a world of one;
// a job of several processes throws ConfigError (its ranks are not threads of one process).
std::unique_ptr<Backend> make_threads_backend(const RendezvousInfo& where, const CommOptions& options);

}  // namespace zerotrain::comm::detail
