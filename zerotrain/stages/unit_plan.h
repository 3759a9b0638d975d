// ZeRO-3's arrangement of a parameter group, as numbers (no LibTorch), shared by the stage
// and the estimator: which parameters stay resident (DeepSpeed's persistence), the group's
// parameters reordered unit by unit, and one bucket per unit (the last unit first, the
// resident unit last).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zerotrain/partition/layout.h"

namespace zerotrain::stages {

struct PersistenceOptions {
  int64_t param_threshold = 100'000;       // stage3_param_persistence_threshold (-1: none)
  int64_t model_threshold = INT64_MAX;     // stage3_model_persistence_threshold
};

// `unit_of_param[i]`: the unit of parameter i (0: in none). Small parameters move to unit 0
// in order while their total stays within the model threshold. Returns how many moved and
// their elements.
struct Persisted {
  int64_t count = 0;
  int64_t numel = 0;
};
Persisted apply_persistence(const std::vector<int64_t>& numels, std::vector<int>& unit_of_param,
                            const PersistenceOptions& options);

struct UnitArrangement {
  std::vector<std::size_t> order;        // new position -> old parameter index
  std::vector<int> unit_of_param;        // by new position
  std::vector<int> unit_of_bucket;
  partition::GroupLayout layout;         // over the reordered parameters
};
UnitArrangement arrange_units(const std::vector<int64_t>& numels, const std::vector<int>& unit_of_param,
                              int world_size, int rank);

}  // namespace zerotrain::stages
