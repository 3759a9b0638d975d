// comm/nccl/: the NCCL transport (GPU), in the plugin libzerotrain_nccl.so, its loader and stub.
// Internal to comm/: Communicator::init opens it from the table in transports.cpp.
#pragma once

#include <memory>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// Loads the plugin (nccl_backend.cpp) and joins the job at `where` over NCCL on
// cuda:LOCAL_RANK (nccl_loader.cpp); throws NotSupported where this build has no NCCL
// (nccl_stub.cpp).
std::unique_ptr<Backend> make_nccl_backend(const RendezvousInfo& where, const CommOptions& options);
// Whether this build has the plugin (nccl_loader.cpp) or only the stub (nccl_stub.cpp).
bool nccl_compiled();

}  // namespace zerotrain::comm::detail
