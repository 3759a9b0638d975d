// Which samples each rank reads in an epoch: PyTorch's DistributedSampler
// (torch/utils/data/distributed.py), index for index, so a run here and a run under
// DeepSpeed/torchrun see the same samples on the same ranks.
//
//   1. shuffle: a permutation of [0, n) from randperm with a CPU generator seeded seed + epoch;
//      otherwise 0, 1, ..., n-1.
//   2. drop_last: truncate to num_samples * num_replicas, num_samples = floor(n / num_replicas);
//      otherwise pad to num_samples * num_replicas, num_samples = ceil(n / num_replicas), by
//      repeating the list from its head (several times over when n < num_replicas).
//   3. rank r takes every num_replicas-th index from position r: indices[r::num_replicas].
#pragma once

#include <cstdint>
#include <vector>

namespace zerotrain::data {

struct SamplerOptions {
  int64_t num_replicas = 1;   // data-parallel world size
  int64_t rank = 0;           // in [0, num_replicas)
  bool shuffle = true;
  uint64_t seed = 0;          // the same on every rank
  bool drop_last = false;     // drop the tail that does not divide evenly instead of padding
};

class DistributedSampler {
 public:
  // Throws UsageError for num_replicas < 1, a rank outside [0, num_replicas) or a negative size.
  DistributedSampler(int64_t dataset_size, SamplerOptions options);

  int64_t num_samples() const { return num_samples_; }                            // per rank, per epoch
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }     // over all ranks
  const SamplerOptions& options() const { return options_; }

  // This rank's sample indices for `epoch` (>= 0), num_samples() of them.
  std::vector<int64_t> indices(int64_t epoch) const;

 private:
  int64_t dataset_size_;
  SamplerOptions options_;
  int64_t num_samples_;
};

}  // namespace zerotrain::data
