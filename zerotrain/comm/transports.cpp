// The table of transports (transports.h): one entry per transport, its factory in its folder.
#include "zerotrain/comm/transports.h"

#include "zerotrain/comm/gloo/gloo_backend.h"
#include "zerotrain/comm/mpi/mpi_backend.h"
#include "zerotrain/comm/nccl/nccl_backend.h"
#include "zerotrain/comm/threads/threads_backend.h"

namespace zerotrain::comm::detail {
namespace {

const Transport kTransports[] = {
    {BackendKind::kGloo, make_gloo_backend},
    {BackendKind::kMpi, make_mpi_backend},
    {BackendKind::kNccl, make_nccl_backend, /*on_device=*/true},
    {BackendKind::kThreads, make_threads_backend},
};

}  // namespace

const Transport* find_transport(BackendKind kind) {
  for (const Transport& t : kTransports) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}

}  // namespace zerotrain::comm::detail
