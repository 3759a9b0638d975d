#include "zerotrain/data/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "zerotrain/core/error.h"

namespace zerotrain::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, SamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  ZT_CHECK(options_.num_replicas >= 1, UsageError, "sampler: num_replicas is ", options_.num_replicas,
           "; it is the data-parallel world size, at least 1");
  ZT_CHECK(options_.rank >= 0 && options_.rank < options_.num_replicas, UsageError, "sampler: rank ", options_.rank,
           " is outside [0, ", options_.num_replicas, "); pass this process's data-parallel rank");
  ZT_CHECK(dataset_size_ >= 0, UsageError, "sampler: the dataset size is ", dataset_size_, "; it cannot be negative");
  // PyTorch writes the drop_last case as ceil((n - r) / r) when r does not divide n: that is floor(n / r).
  num_samples_ = options_.drop_last ? dataset_size_ / options_.num_replicas
                                    : (dataset_size_ + options_.num_replicas - 1) / options_.num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  ZT_CHECK(epoch >= 0, UsageError, "sampler: epoch ", epoch, " is negative; epochs count from 0");
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  if (options_.shuffle) {
    // The generator and the kernel Python's torch.randperm(n, generator=g) uses after
    // g.manual_seed(seed + epoch): the same permutation, whatever the thread count.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(options_.seed + static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(dataset_size_, generator, at::TensorOptions().dtype(at::kLong));
    const int64_t* p = perm.const_data_ptr<int64_t>();
    all.assign(p, p + dataset_size_);
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) all[static_cast<size_t>(i)] = i;
  }
  const auto total = static_cast<size_t>(total_size());
  if (all.size() > total) {
    all.resize(total);
  } else {
    all.reserve(total);
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);   // the head repeated, cyclically
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(options_.rank); i < all.size(); i += static_cast<size_t>(options_.num_replicas)) {
    mine.push_back(all[i]);
  }
  ZT_INTERNAL_ASSERT(static_cast<int64_t>(mine.size()) == num_samples_, "sampler gave ", mine.size(), " indices, not ",
                     num_samples_);
  return mine;
}

}  // namespace zerotrain::data
