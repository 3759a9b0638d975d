// Built when the CUDA toolkit with NCCL was not found at configure time.
#include "zerotrain/comm/backend.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

bool nccl_compiled() { return false; }

std::unique_ptr<Backend> make_nccl_backend(const RendezvousInfo&, const CommOptions&) {
  throw NotSupported("this zerotrain was built without NCCL (no CUDA toolkit with nccl.h at configure time); "
                     "use the gloo or mpi backend on CPU");
}

}  // namespace zerotrain::comm::detail
