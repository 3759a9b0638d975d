#include "zerotrain/stages/stage3/units.h"

#include <torch/nn/module.h>

#include <algorithm>

#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::stages::stage3 {
namespace {

bool inside(const std::string& inner, const std::string& outer) {
  return outer.empty() ? !inner.empty() : inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                                              inner[outer.size()] == '.';
}

}  // namespace

UnitMap find_units(torch::nn::Module& model, const PersistenceOptions& options) {
  UnitMap map;
  map.units.push_back({});   // the resident unit
  std::vector<int> depth{0};
  auto add = [&](const std::string& name, torch::nn::Module* module) {
    auto* sharded = dynamic_cast<ShardedModule*>(module);
    if (!sharded) return;
    int d = 1;
    for (size_t u = 1; u < map.units.size(); ++u) d += inside(name, map.units[u].name) ? 1 : 0;
    map.units.push_back({name, sharded, {}});
    depth.push_back(d);
  };
  // The model itself first (named_modules can only include it for a module held by a
  // shared_ptr), then its descendants in pre-order.
  add("", &model);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) add(item.key(), item.value().get());
  // Owners: the deepest unit holding the parameter, the first in module order among equals.
  for (size_t u = 1; u < map.units.size(); ++u) {
    for (const auto& p : map.units[u].module->parameters()) {
      const c10::TensorImpl* key = p.unsafeGetTensorImpl();
      auto it = map.owner.find(key);
      if (it == map.owner.end() || depth[u] > depth[it->second]) map.owner[key] = static_cast<int>(u);
    }
  }
  // Small parameters stay gathered: gathering them costs more than it saves (DeepSpeed's
  // persistence), as long as all of them together stay under the model threshold. Trainable
  // parameters only, in model order, as the estimator counts them (stages/unit_plan.h).
  std::vector<const c10::TensorImpl*> keys;
  std::vector<int64_t> numels;
  std::vector<int> units;
  for (const auto& p : model.parameters()) {
    const c10::TensorImpl* key = p.unsafeGetTensorImpl();
    if (!p.requires_grad() || std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    keys.push_back(key);
    numels.push_back(p.numel());
    units.push_back(map.owner_of(key));
  }
  const Persisted kept = apply_persistence(numels, units, options);
  map.persistent_count = kept.count;
  map.persistent_numel = kept.numel;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (units[i] == 0) map.owner.erase(keys[i]);
  }
  // Uses: the owners of a unit's parameters and of the parameters it registered as external,
  // except units nested in it (they gather their own).
  for (size_t u = 1; u < map.units.size(); ++u) {
    Unit& unit = map.units[u];
    unit.uses.push_back(static_cast<int>(u));
    std::vector<at::Tensor> used = unit.module->parameters();
    const auto& external = unit.module->external_parameters();
    used.insert(used.end(), external.begin(), external.end());
    for (const auto& p : used) {
      const int o = map.owner_of(p.unsafeGetTensorImpl());
      if (o == 0 || inside(map.units[o].name, unit.name)) continue;
      if (std::find(unit.uses.begin(), unit.uses.end(), o) == unit.uses.end()) unit.uses.push_back(o);
    }
  }
  return map;
}

}  // namespace zerotrain::stages::stage3
