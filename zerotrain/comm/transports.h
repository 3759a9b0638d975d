// The transports Communicator::init opens by name, as a table: a new transport is a folder
// under comm/ that defines its factory, and one entry in transports.cpp. Internal to comm/.
#pragma once

#include <memory>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// Joins the job at `where` over one transport, or throws why it cannot.
using OpenBackend = std::unique_ptr<Backend> (*)(const RendezvousInfo& where, const CommOptions& options);

struct Transport {
  BackendKind kind;
  OpenBackend open;
  // Its collectives run on the GPU (NCCL): it is opened even for a world of one, whose
  // collectives are otherwise local copies, and shared memory (comm/shm/), which moves host
  // memory between the ranks of a host, is not layered over it.
  bool on_device = false;
};

// The entry for `kind`; null for the kinds that name no transport to open: kAuto and kShm
// (Communicator::init resolves them to gloo or mpi first) and kProcessGroup (a torch.distributed
// group is adopted, comm/process_group/, over a Communicator: it cannot be in this table).
const Transport* find_transport(BackendKind kind);

}  // namespace zerotrain::comm::detail
