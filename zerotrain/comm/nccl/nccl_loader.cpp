// The nccl backend lives in a plugin, libzerotrain_nccl.so (comm/nccl/nccl_backend.cpp, built
// on c10d's ProcessGroupNCCL), which this file loads the first time a job asks for nccl.
// ProcessGroupNCCL is part of LibTorch's CUDA half, and linking that into every program
// would cost each CPU process ~240 MiB of memory (zerotrain/cuda/autoload.cpp says more).
// The plugin's references to zerotrain's own functions (the rendezvous store, the progress
// board, logging, the typed errors) resolve to this program's, which exports them.
#include <dlfcn.h>
#include <nccl.h>

#include "zerotrain/comm/nccl/nccl_backend.h"
#include "zerotrain/comm/report.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

using Factory = Backend* (*)(const RendezvousInfo&, const CommOptions&);

// ZEROTRAIN_NCCL_PLUGIN overrides where the plugin is (an installed copy, say).
Factory load_factory() {
  static Factory factory = [] {
    const std::string path = env::get("ZEROTRAIN_NCCL_PLUGIN").value_or(ZEROTRAIN_NCCL_PLUGIN_PATH);
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      throw NotSupported(str("the nccl backend's plugin did not load: ", ::dlerror(),
                             ". Rebuild zerotrain (it builds ", path,
                             "), point ZEROTRAIN_NCCL_PLUGIN at the file, or use the gloo backend"));
    }
    auto* symbol = reinterpret_cast<Factory>(::dlsym(handle, "zerotrain_make_nccl_backend"));
    ZT_CHECK(symbol != nullptr, NotSupported, path, " is not zerotrain's nccl plugin (no zerotrain_make_nccl_backend); "
             "rebuild zerotrain or fix ZEROTRAIN_NCCL_PLUGIN");
    return symbol;
  }();
  return factory;
}

}  // namespace

bool nccl_compiled() { return true; }

std::unique_ptr<Backend> make_nccl_backend(const RendezvousInfo& where, const CommOptions& options) {
  return std::unique_ptr<Backend>(load_factory()(where, options));
}

}  // namespace zerotrain::comm::detail

namespace zerotrain::comm {

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "unknown";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since NCCL 2.9 (X * 1000 + Y * 100 + Z before).
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace zerotrain::comm
