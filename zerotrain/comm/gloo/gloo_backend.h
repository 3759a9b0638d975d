// comm/gloo/: the Gloo transport (CPU, TCP) through c10d's ProcessGroupGloo.
// Internal to comm/: Communicator::init opens it from the table in transports.cpp.
#pragma once

#include <memory>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// Joins the job at `where` over Gloo, meeting in the rendezvous store that rank 0 serves at
// MASTER_ADDR:MASTER_PORT (comm/rendezvous/store.h).
std::unique_ptr<Backend> make_gloo_backend(const RendezvousInfo& where, const CommOptions& options);

}  // namespace zerotrain::comm::detail
