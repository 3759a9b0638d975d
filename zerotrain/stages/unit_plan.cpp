#include "zerotrain/stages/unit_plan.h"

#include <algorithm>
#include <numeric>

namespace zerotrain::stages {

Persisted apply_persistence(const std::vector<int64_t>& numels, std::vector<int>& unit_of_param,
                            const PersistenceOptions& options) {
  Persisted kept;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    if (unit_of_param[i] == 0 || numels[i] > options.param_threshold) continue;
    if (kept.numel + numels[i] > options.model_threshold) continue;
    kept.numel += numels[i];
    ++kept.count;
    unit_of_param[i] = 0;
  }
  return kept;
}

UnitArrangement arrange_units(const std::vector<int64_t>& numels, const std::vector<int>& unit_of_param,
                              int world_size, int rank) {
  UnitArrangement a;
  a.order.resize(numels.size());
  std::iota(a.order.begin(), a.order.end(), 0);
  // Unit order (the resident unit first), model order within a unit.
  std::stable_sort(a.order.begin(), a.order.end(),
                   [&](std::size_t x, std::size_t y) { return unit_of_param[x] < unit_of_param[y]; });
  std::vector<int64_t> sorted_numels;
  for (std::size_t i : a.order) {
    sorted_numels.push_back(numels[i]);
    a.unit_of_param.push_back(unit_of_param[i]);
  }
  const int units = a.unit_of_param.empty() ? 0 : *std::max_element(a.unit_of_param.begin(), a.unit_of_param.end());
  // One bucket per unit: the last unit first (backward meets it first), the resident unit
  // last, since its gradients come from all over the backward.
  std::vector<std::vector<std::size_t>> buckets;
  for (int u = units; u >= 0; --u) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < a.unit_of_param.size(); ++i) {
      if (a.unit_of_param[i] == u) members.push_back(i);
    }
    if (members.empty()) continue;
    buckets.push_back(std::move(members));
    a.unit_of_bucket.push_back(u);
  }
  a.layout = partition::GroupLayout(sorted_numels, buckets, world_size, rank);
  return a;
}

}  // namespace zerotrain::stages
