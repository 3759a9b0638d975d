// Where ZeRO-3's units are in a model: every zerotrain::Sharded module is one; a parameter
// belongs to the innermost unit holding it (the first one, in module order, among units as
// deep), and a unit also uses the units that own parameters it shares (a head tied to the
// embedding). Parameters no unit holds, and small ones (stage3_param_persistence_threshold,
// within stage3_model_persistence_threshold), form the resident unit 0 that stays gathered.
#pragma once

#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "zerotrain/stages/unit_plan.h"

namespace torch::nn {
class Module;
}

namespace zerotrain {
class ShardedModule;
}

namespace zerotrain::stages::stage3 {

struct Unit {
  std::string name;                        // the module's path ("" for the resident unit)
  ShardedModule* module = nullptr;         // null for the resident unit
  std::vector<int> uses;                   // units gathered with it, itself first; never 0
};

struct UnitMap {
  std::vector<Unit> units;                 // units[0]: the resident unit
  std::unordered_map<const c10::TensorImpl*, int> owner;   // every parameter of the model
  int64_t persistent_numel = 0;            // small parameters moved to unit 0
  int64_t persistent_count = 0;
  int owner_of(const c10::TensorImpl* p) const {
    auto it = owner.find(p);
    return it == owner.end() ? 0 : it->second;
  }
};

using stages::PersistenceOptions;

UnitMap find_units(torch::nn::Module& model, const PersistenceOptions& options);

}  // namespace zerotrain::stages::stage3
