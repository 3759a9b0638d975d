// The C++ side of a Python model: a torch::nn::Module tree that mirrors the Python module
// tree and registers the very same parameter and buffer tensors (no copies), so that the
// engine, which takes a torch::nn::Module, trains the Python model's own tensors. A Python
// module that is a ZeRO-3 unit is mirrored by a zerotrain::ShardedModule, whose gathers the
// Python module's forward hooks drive (python/zerotrain/runtime/zero/hooks.py).
#pragma once

#include <memory>

namespace torch::nn {
class Module;
}

namespace zerotrain {
class ShardedModule;
}

namespace zerotrain::python {

struct Mirror {
  std::shared_ptr<torch::nn::Module> module;
  ShardedModule* unit = nullptr;   // set for a ZeRO-3 unit (module is then one)
};

}  // namespace zerotrain::python
