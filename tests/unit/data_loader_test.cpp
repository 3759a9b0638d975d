// The distributed sampler against PyTorch's DistributedSampler, and the prefetching loader:
// the same batches in the same order whatever the number of workers, resuming at a batch,
// a worker's exception in the caller, and a loader dropped mid-epoch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/data/image_dataset.h"
#include "zerotrain/data/loader.h"
#include "zerotrain/data/sampler.h"

namespace zerotrain::data {
namespace {

using Indices = std::vector<int64_t>;

// ------------------------------------------------------------------------------------------
// DistributedSampler

Indices sample(int64_t n, int64_t replicas, int64_t rank, uint64_t seed, int64_t epoch, bool shuffle, bool drop_last) {
  SamplerOptions options;
  options.num_replicas = replicas;
  options.rank = rank;
  options.seed = seed;
  options.shuffle = shuffle;
  options.drop_last = drop_last;
  return DistributedSampler(n, options).indices(epoch);
}

// Computed once with the pinned Python environment's torch (2.15) by
//   s = torch.utils.data.DistributedSampler(range(n), num_replicas, rank, shuffle, seed, drop_last)
//   s.set_epoch(epoch); list(s)
// The permutation is torch.randperm's with a CPU generator, so these hold for any LibTorch
// whose randperm kernel is the same; a change there shows up here first.
TEST(Sampler, MatchesPyTorch) {
  EXPECT_EQ(sample(10, 1, 0, 0, 0, true, false), (Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  EXPECT_EQ(sample(10, 1, 0, 0, 1, true, false), (Indices{5, 6, 1, 2, 0, 8, 9, 3, 7, 4}));
  EXPECT_EQ(sample(10, 3, 1, 0, 0, true, false), (Indices{1, 3, 8, 4}));
  EXPECT_EQ(sample(10, 3, 2, 42, 3, true, false), (Indices{5, 9, 2, 6}));
  EXPECT_EQ(sample(10, 3, 2, 42, 3, true, true), (Indices{5, 9, 2}));
  EXPECT_EQ(sample(7, 4, 3, 0, 0, false, false), (Indices{3, 0}));
  EXPECT_EQ(sample(7, 4, 3, 0, 0, false, true), (Indices{3}));
  EXPECT_EQ(sample(20, 1, 0, 7, 2, true, false),
            (Indices{10, 15, 2, 14, 0, 13, 9, 6, 7, 4, 18, 12, 1, 17, 8, 11, 16, 5, 19, 3}));
  // Dataset-sized: the head, the tail and the sum of the list.
  const auto expect_large = [](const Indices& got, int64_t size, const Indices& head, const Indices& tail,
                               int64_t sum) {
    ASSERT_EQ(static_cast<int64_t>(got.size()), size);
    EXPECT_EQ(Indices(got.begin(), got.begin() + 5), head);
    EXPECT_EQ(Indices(got.end() - 3, got.end()), tail);
    EXPECT_EQ(std::accumulate(got.begin(), got.end(), int64_t{0}), sum);
  };
  expect_large(sample(60000, 4, 1, 1234, 3, true, false), 15000, {53212, 1877, 48872, 16853, 345},
               {10573, 51003, 14987}, 447186727);
  expect_large(sample(50001, 3, 2, 0, 0, true, false), 16667, {26370, 43192, 38277, 37117, 31978},
               {9797, 11981, 13361}, 416916384);   // padded by one
}

TEST(Sampler, PaddingRepeatsTheHead) {
  // 0..9 padded to 12: 0..9, 0, 1; rank r takes positions r, r + 4, r + 8.
  EXPECT_EQ(sample(10, 4, 2, 0, 0, false, false), (Indices{2, 6, 0}));
  EXPECT_EQ(sample(10, 4, 3, 0, 0, false, false), (Indices{3, 7, 1}));
  // Fewer samples than ranks: the list repeats as often as needed, 0 1 0 1 0.
  EXPECT_EQ(sample(2, 5, 4, 0, 0, false, false), (Indices{0}));
  EXPECT_EQ(sample(2, 5, 3, 0, 0, false, false), (Indices{1}));
  SamplerOptions options;
  options.num_replicas = 4;
  EXPECT_EQ(DistributedSampler(10, options).num_samples(), 3);
  EXPECT_EQ(DistributedSampler(10, options).total_size(), 12);
}

TEST(Sampler, DropLastTruncates) {
  EXPECT_EQ(sample(10, 4, 3, 0, 0, false, true), (Indices{3, 7}));
  EXPECT_EQ(sample(2, 5, 0, 0, 0, false, true), (Indices{}));
  SamplerOptions options;
  options.num_replicas = 4;
  options.drop_last = true;
  EXPECT_EQ(DistributedSampler(10, options).num_samples(), 2);
  EXPECT_EQ(DistributedSampler(12, options).num_samples(), 3);
}

TEST(Sampler, EpochChangesTheOrder) {
  const Indices a = sample(100, 1, 0, 5, 0, true, false), b = sample(100, 1, 0, 5, 1, true, false);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, sample(100, 1, 0, 5, 0, true, false));   // and the same epoch, the same order
  EXPECT_NE(a, sample(100, 1, 0, 6, 0, true, false));    // another seed, another order
  for (Indices x : {a, b}) {
    std::sort(x.begin(), x.end());
    Indices all(100);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(x, all);
  }
}

TEST(Sampler, RanksAreDisjointAndCoverTheDataset) {
  for (const bool drop_last : {false, true}) {
    const int64_t n = drop_last ? 14 : 12, replicas = 4;   // 12 divides evenly: no padding
    std::set<int64_t> seen;
    int64_t count = 0;
    for (int64_t rank = 0; rank < replicas; ++rank) {
      const Indices mine = sample(n, replicas, rank, 3, 1, true, drop_last);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), 3);
      seen.insert(mine.begin(), mine.end());
      count += static_cast<int64_t>(mine.size());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), count);   // disjoint
    if (!drop_last) {
      EXPECT_EQ(count, n);   // and together all of it
      EXPECT_EQ(*seen.rbegin(), n - 1);
    }
  }
}

TEST(Sampler, RejectsBadOptions) {
  SamplerOptions options;
  options.num_replicas = 0;
  EXPECT_THROW(DistributedSampler(10, options), UsageError);
  options.num_replicas = 3;
  options.rank = 3;
  try {
    DistributedSampler(10, options);
    ADD_FAILURE() << "rank 3 of 3 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 is outside [0, 3)"), std::string::npos) << e.what();
  }
  options.rank = -1;
  EXPECT_THROW(DistributedSampler(10, options), UsageError);
  options.rank = 0;
  EXPECT_THROW(DistributedSampler(10, options).indices(-1), UsageError);
}

// ------------------------------------------------------------------------------------------
// DataLoader

// Sample i is inputs (i) as fp32 and target i; loading sample `fail_at` throws IoError.
// Counts the batches it loaded.
class CountingDataset final : public Dataset {
 public:
  explicit CountingDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {
    info_.task = Task::kRegression;
    info_.description = "counting";
  }
  int64_t size() const override { return n_; }
  const DatasetInfo& info() const override { return info_; }
  Batch get(const Indices& indices) const override {
    check_sample_indices(indices, n_, info_);
    ++loads_;
    for (const int64_t i : indices) {
      if (i == fail_at_) throw IoError("sample " + std::to_string(i) + " is damaged");
    }
    const at::Tensor t = at::tensor(indices);
    return {t.to(at::kFloat), t};
  }
  int64_t loads() const { return loads_.load(); }

 private:
  int64_t n_, fail_at_;
  DatasetInfo info_;
  mutable std::atomic<int64_t> loads_{0};
};

Indices targets_of(const Batch& b) {
  const at::Tensor t = b.targets.contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

std::vector<Indices> drain(DataLoader& loader) {
  std::vector<Indices> out;
  while (auto batch = loader.next()) out.push_back(targets_of(*batch));
  return out;
}

Indices shuffled(int64_t n) { return sample(n, 1, 0, 11, 0, true, false); }

TEST(Loader, SameBatchesWhateverTheWorkers) {
  // Real image batches: the workers run index_select and the normalisation concurrently.
  const auto images = at::randint(0, 256, {23, 1, 4, 4}, at::kByte);
  const ImageDataset dataset(images, at::arange(23, at::kLong) % 10, 10, "random");
  const Indices order = shuffled(23);
  std::vector<Batch> reference;
  for (const int workers : {0, 1, 3}) {
    LoaderOptions options;
    options.batch_size = 4;
    options.num_workers = workers;
    DataLoader loader(dataset, order, options);
    EXPECT_EQ(loader.num_batches(), 6);
    std::vector<Batch> batches;
    while (auto b = loader.next()) batches.push_back(*b);
    ASSERT_EQ(batches.size(), 6u) << workers << " workers";
    EXPECT_EQ(batches.back().targets.size(0), 3);   // 23 = 5 * 4 + 3
    if (workers == 0) {
      reference = batches;
      for (size_t k = 0; k < batches.size(); ++k) {
        for (int64_t j = 0; j < batches[k].targets.size(0); ++j) {
          EXPECT_EQ(batches[k].targets[j].item<int64_t>(), order[k * 4 + static_cast<size_t>(j)] % 10);
        }
      }
      continue;
    }
    for (size_t k = 0; k < batches.size(); ++k) {
      EXPECT_TRUE(at::equal(batches[k].inputs, reference[k].inputs)) << workers << " workers, batch " << k;
      EXPECT_TRUE(at::equal(batches[k].targets, reference[k].targets)) << workers << " workers, batch " << k;
    }
    EXPECT_FALSE(loader.next().has_value());   // and stays done
  }
}

TEST(Loader, DropLastDropsThePartialBatch) {
  const CountingDataset dataset(10);
  const Indices order = shuffled(10);
  for (const int workers : {0, 2}) {
    LoaderOptions options;
    options.batch_size = 4;
    options.num_workers = workers;
    options.drop_last = true;
    DataLoader loader(dataset, order, options);
    EXPECT_EQ(loader.num_batches(), 2);
    const auto batches = drain(loader);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[1], Indices(order.begin() + 4, order.begin() + 8));
  }
}

TEST(Loader, FirstBatchSkips) {
  const auto dataset = std::make_shared<const CountingDataset>(20);
  const Indices order = shuffled(20);
  for (const int workers : {0, 2}) {
    LoaderOptions options;
    options.batch_size = 3;   // 7 batches, the last of 2
    options.num_workers = workers;
    options.first_batch = 5;
    DataLoader loader(dataset, order, options);
    EXPECT_EQ(loader.num_batches(), 7);
    const auto batches = drain(loader);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[0], Indices(order.begin() + 15, order.begin() + 18));
    EXPECT_EQ(batches[1], Indices(order.begin() + 18, order.end()));
  }
  LoaderOptions at_end;
  at_end.batch_size = 3;
  at_end.num_workers = 2;
  at_end.first_batch = 7;   // resuming after the last batch: nothing left
  DataLoader done(dataset, order, at_end);
  EXPECT_FALSE(done.next().has_value());
  at_end.first_batch = 8;
  EXPECT_THROW(DataLoader(dataset, order, at_end), UsageError);
}

TEST(Loader, WorkerExceptionSurfacesFromNext) {
  Indices order(12);
  std::iota(order.begin(), order.end(), 0);
  const CountingDataset dataset(12, /*fail_at=*/7);   // in batch 3 of 2 samples each
  for (const int workers : {0, 1, 3}) {
    LoaderOptions options;
    options.batch_size = 2;
    options.num_workers = workers;
    DataLoader loader(dataset, order, options);
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(loader.next().has_value()) << workers << " workers, batch " << k;
    for (int attempt = 0; attempt < 2; ++attempt) {   // and again on the next call
      try {
        loader.next();
        ADD_FAILURE() << workers << " workers: no error";
      } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("sample 7 is damaged"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Loader, DestroyedMidEpochStopsItsWorkers) {
  const CountingDataset dataset(100000);
  Indices order(100000);
  std::iota(order.begin(), order.end(), 0);
  LoaderOptions options;
  options.batch_size = 10;
  options.num_workers = 3;
  options.prefetch_batches = 2;
  const auto start = std::chrono::steady_clock::now();
  {
    DataLoader loader(dataset, order, options);
    ASSERT_TRUE(loader.next().has_value());
  }   // 9,999 batches left: the workers are waiting for room, or loading one each
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // At most the one consumed plus the window of 3 * 2 ahead of it were ever loaded.
  EXPECT_LE(dataset.loads(), 1 + 3 * 2);
  EXPECT_LT(elapsed_s, 10.0);   // prompt: the workers do not run the epoch out
}

TEST(Loader, RejectsBadOptions) {
  const CountingDataset dataset(10);
  const Indices order = shuffled(10);
  LoaderOptions options;
  options.batch_size = 0;
  EXPECT_THROW(DataLoader(dataset, order, options), UsageError);
  options.batch_size = 2;
  options.num_workers = -1;
  EXPECT_THROW(DataLoader(dataset, order, options), UsageError);
  options.num_workers = 1;
  options.prefetch_batches = 0;
  EXPECT_THROW(DataLoader(dataset, order, options), UsageError);
}

}  // namespace
}  // namespace zerotrain::data
