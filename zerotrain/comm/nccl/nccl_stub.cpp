// Built when this LibTorch has no CUDA half or NCCL was not found at configure time
// (cmake/ZerotrainCuda.cmake, ZEROTRAIN_HAVE_NCCL off).
#include "zerotrain/comm/nccl/nccl_backend.h"
#include "zerotrain/comm/report.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

bool nccl_compiled() { return false; }

std::unique_ptr<Backend> make_nccl_backend(const RendezvousInfo&, const CommOptions&) {
  throw NotSupported("this zerotrain was built without NCCL (the LibTorch it was built with has no CUDA half, or "
                     "NCCL was not found at configure time; see docs/gpu.md); use the gloo or mpi backend on CPU");
}

}  // namespace zerotrain::comm::detail

namespace zerotrain::comm {

std::string nccl_version() { return ""; }

}  // namespace zerotrain::comm
