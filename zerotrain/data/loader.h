// Batches of a dataset in a fixed order, loaded ahead by background threads (docs/data.md).
//
// The batches are `indices` cut into runs of batch_size, in order; the output is the same
// whatever num_workers is. With workers, batch k (counted from first_batch) is loaded by
// worker k % num_workers into a window of num_workers * prefetch_batches batches ahead of
// the consumer, so memory stays bounded when training is slower than loading.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zerotrain/data/batch.h"
#include "zerotrain/data/dataset.h"

namespace zerotrain::data {

struct LoaderOptions {
  int64_t batch_size = 1;
  bool drop_last = false;       // drop a last batch smaller than batch_size
  int num_workers = 0;          // 0: load in the thread that calls next()
  int prefetch_batches = 2;     // per worker
  int64_t first_batch = 0;      // start at this batch (resuming mid-epoch); up to num_batches()
};

class DataLoader {
 public:
  // `indices`: this rank's sample indices for the epoch (DistributedSampler::indices).
  DataLoader(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices, LoaderOptions options);
  // Borrows `dataset`, which must outlive the loader.
  DataLoader(const Dataset& dataset, std::vector<int64_t> indices, LoaderOptions options);
  // Stops the workers and joins them; each finishes at most the batch it is loading.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch, or nullopt after the last. An exception thrown while loading a batch is
  // rethrown here when that batch is due (and again on every later call).
  std::optional<Batch> next();
  // Batches in the epoch, counting those before first_batch.
  int64_t num_batches() const { return num_batches_; }

 private:
  struct Prefetcher;   // the worker threads and their window (loader.cpp)

  Batch load(int64_t batch) const;

  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
  LoaderOptions options_;
  int64_t num_batches_;
  int64_t next_batch_;
  std::unique_ptr<Prefetcher> prefetcher_;   // null when num_workers == 0
};

}  // namespace zerotrain::data
