// comm/process_group/: collectives over a torch.distributed process group the engine adopts.
//
// A Communicator over a c10d process group made outside the engine: in a Python script that
// called torch.distributed.init_process_group, the engine's collectives run on that group
// instead of a second one (python/zerotrain/comm). The group may be Gloo, NCCL or both
// (torch's "cpu:gloo,cuda:nccl"); each tensor goes to the group's backend for its device.
// Collectives on a shared group must be issued in the same order on every rank: the engine
// issues its own only inside its calls (forward hooks, backward, step, checkpoints), so a
// script's own collectives between those calls interleave safely.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "zerotrain/comm/communicator.h"

namespace zerotrain::comm {

struct AdoptedGroup {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // The group's store, where the progress board lives (the ranks that did not arrive at a
  // timed-out collective are named from it). Null: a timeout names no ranks.
  c10::intrusive_ptr<c10d::Store> store;
};

// Throws ConfigError when the group is missing or has no backend for `device`'s type.
// options.backend is ignored (the group's backends decide); the timeout and fingerprint
// checks apply as with any backend.
Communicator adopt_process_group(AdoptedGroup adopted, at::Device device, CommOptions options = {});

// Drops every adopted group's reference held by a Communicator still alive, so that
// torch.distributed.destroy_process_group() really ends the group: c10d's Gloo backend joins
// its worker threads only in its destructor. The Python package calls it at interpreter exit,
// before Python finalizes: a worker thread that frees a Python tensor after that aborts the
// process ("terminate called without an active exception"). A collective on a released
// Communicator throws CommError. Call it with no collective in flight. Returns how many
// groups it released.
int release_adopted_groups();

}  // namespace zerotrain::comm
