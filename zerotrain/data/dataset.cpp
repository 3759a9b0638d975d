#include "zerotrain/data/dataset.h"

#include "zerotrain/core/error.h"

namespace zerotrain::data {

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "eval"; }

void check_sample_indices(const std::vector<int64_t>& indices, int64_t size, const DatasetInfo& info) {
  ZT_CHECK(!indices.empty(), UsageError, info.description, ": a batch needs at least one sample index");
  for (const int64_t i : indices) {
    ZT_CHECK(i >= 0 && i < size, UsageError, info.description, ": sample index ", i, " is outside [0, ", size,
             "); indices come from a sampler over this dataset's size()");
  }
}

}  // namespace zerotrain::data
