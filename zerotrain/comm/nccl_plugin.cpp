// The entry point of libzerotrain_nccl.so, which comm/nccl_loader.cpp looks up by name.
#include "zerotrain/comm/backend.h"

extern "C" __attribute__((visibility("default"))) zerotrain::comm::detail::Backend* zerotrain_make_nccl_backend(
    const zerotrain::comm::RendezvousInfo& where, const zerotrain::comm::CommOptions& options) {
  return zerotrain::comm::detail::make_nccl_backend(where, options).release();
}
