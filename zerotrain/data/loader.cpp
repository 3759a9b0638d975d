#include "zerotrain/data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "zerotrain/core/error.h"

namespace zerotrain::data {

// A batch a worker finished: the batch, or what loading it threw.
struct LoadedBatch {
  Batch batch;
  std::exception_ptr error;
};

// Worker w loads batches first + w, first + w + W, ... (W workers), each only once it is
// within `window` batches of the consumer; finished batches wait in `loaded` until next()
// takes them in order. One mutex, two condition variables: no polling.
struct DataLoader::Prefetcher {
  std::mutex mutex;
  std::condition_variable batch_loaded;   // wakes the consumer
  std::condition_variable window_moved;   // wakes the workers (also on stop)
  std::map<int64_t, LoadedBatch> loaded;  // by batch number
  int64_t consumer_at = 0;                // the batch next() returns next
  int64_t window = 0;
  bool stop = false;
  std::vector<std::thread> threads;

  // Also on a constructor that throws after starting some threads: they are stopped and joined.
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    window_moved.notify_all();
    for (auto& t : threads) t.join();
  }

  void run(const DataLoader& loader, int64_t first, int64_t stride) {
    for (int64_t b = first; b < loader.num_batches_; b += stride) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        window_moved.wait(lock, [&] { return stop || b < consumer_at + window; });
        if (stop) return;
      }
      LoadedBatch result;
      try {
        result.batch = loader.load(b);
      } catch (...) {
        result.error = std::current_exception();
      }
      const bool failed = result.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex);
        loaded.emplace(b, std::move(result));
      }
      batch_loaded.notify_all();
      if (failed) return;   // the consumer stops at this batch; the batches after it are never due
    }
  }
};

DataLoader::DataLoader(const Dataset& dataset, std::vector<int64_t> indices, LoaderOptions options)
    // Aliasing constructor with no owner: a non-owning pointer with the owning one's type.
    : DataLoader(std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &dataset), std::move(indices),
                 options) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices, LoaderOptions options)
    : dataset_(std::move(dataset)), indices_(std::move(indices)), options_(options) {
  ZT_CHECK(dataset_ != nullptr, UsageError, "data loader: no dataset given");
  ZT_CHECK(options_.batch_size >= 1, UsageError, "data loader: batch_size is ", options_.batch_size,
           "; it must be at least 1");
  ZT_CHECK(options_.num_workers >= 0, UsageError, "data loader: num_workers is ", options_.num_workers,
           "; use 0 to load in the calling thread");
  ZT_CHECK(options_.prefetch_batches >= 1, UsageError, "data loader: prefetch_batches is ", options_.prefetch_batches,
           "; each worker needs room for at least 1 batch");
  const auto n = static_cast<int64_t>(indices_.size());
  // Rounded up without n + batch_size - 1, which overflows for a batch size near 2^63.
  num_batches_ = n / options_.batch_size + (!options_.drop_last && n % options_.batch_size != 0 ? 1 : 0);
  ZT_CHECK(options_.first_batch >= 0 && options_.first_batch <= num_batches_, UsageError, "data loader: first_batch ",
           options_.first_batch, " is outside [0, ", num_batches_, "]: the epoch has ", num_batches_,
           " batches of ", options_.batch_size, " from ", n, " samples");
  next_batch_ = options_.first_batch;

  const int64_t remaining = num_batches_ - next_batch_;
  const int64_t workers = std::min<int64_t>(options_.num_workers, remaining);
  if (workers == 0) return;
  prefetcher_ = std::make_unique<Prefetcher>();
  prefetcher_->consumer_at = next_batch_;
  prefetcher_->window = workers * options_.prefetch_batches;
  Prefetcher* prefetcher = prefetcher_.get();
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t first = next_batch_ + w;   // by value: next() moves next_batch_ under the workers
    prefetcher->threads.emplace_back([this, prefetcher, first, workers] { prefetcher->run(*this, first, workers); });
  }
}

DataLoader::~DataLoader() = default;   // ~Prefetcher stops and joins the workers

Batch DataLoader::load(int64_t batch) const {
  const int64_t begin = batch * options_.batch_size;
  const int64_t end = std::min<int64_t>(begin + options_.batch_size, static_cast<int64_t>(indices_.size()));
  return dataset_->get(std::vector<int64_t>(indices_.begin() + begin, indices_.begin() + end));
}

std::optional<Batch> DataLoader::next() {
  if (next_batch_ >= num_batches_) return std::nullopt;
  if (!prefetcher_) {
    Batch batch = load(next_batch_);   // a batch that throws stays due, as with workers
    ++next_batch_;
    return batch;
  }

  Prefetcher& p = *prefetcher_;
  std::unique_lock<std::mutex> lock(p.mutex);
  p.batch_loaded.wait(lock, [&] { return p.loaded.count(next_batch_) != 0; });
  auto it = p.loaded.find(next_batch_);
  if (it->second.error) std::rethrow_exception(it->second.error);   // kept: later calls throw it again
  Batch batch = std::move(it->second.batch);
  p.loaded.erase(it);
  p.consumer_at = ++next_batch_;
  lock.unlock();
  p.window_moved.notify_all();
  return batch;
}

}  // namespace zerotrain::data
