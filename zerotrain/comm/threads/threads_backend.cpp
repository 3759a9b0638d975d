// The in-process backend: ranks are threads of one process sharing a ThreadWorld. Each
// collective is two rendezvous: after the first, every rank's input is posted and each
// rank computes its own result from all of them (in rank order, so every rank gets the
// same bits); after the second, nobody reads an input any more and results are written.
// Operations complete while being issued; the Work returned is already done.
#include "zerotrain/comm/threads/threads_backend.h"

#include <ATen/ATen.h>

#include <condition_variable>
#include <mutex>

#include "zerotrain/comm/collective_work.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

class ThreadWorld;

class LocalBoard final : public ProgressBoard {
 public:
  explicit LocalBoard(int world_size) : entries_(world_size) {
    for (int r = 0; r < world_size; ++r) entries_[r] = RankProgress{r, true, 0, ""};
  }
  void publish_for(int rank, int64_t seq, const std::string& what) {
    std::lock_guard lock(mutex_);
    entries_[rank].seq = seq;
    entries_[rank].what = what;
  }
  void publish(int64_t, const std::string&) override { ZT_INTERNAL_ASSERT(false, "use RankBoard"); }
  std::vector<RankProgress> snapshot() override {
    std::lock_guard lock(mutex_);
    return entries_;
  }

 private:
  std::mutex mutex_;
  std::vector<RankProgress> entries_;
};

// One rank's view of the shared board.
class RankBoard final : public ProgressBoard {
 public:
  RankBoard(std::shared_ptr<LocalBoard> board, int rank) : board_(std::move(board)), rank_(rank) {}
  void publish(int64_t seq, const std::string& what) override { board_->publish_for(rank_, seq, what); }
  std::vector<RankProgress> snapshot() override { return board_->snapshot(); }

 private:
  std::shared_ptr<LocalBoard> board_;
  int rank_;
};

class ThreadWorld {
 public:
  ThreadWorld(int world_size, std::chrono::milliseconds timeout)
      : world_size_(world_size), timeout_(timeout), posted_(world_size) {}

  int world_size() const { return world_size_; }

  // Posts `input` for `rank` and waits for every rank; false on timeout (the world is then
  // broken for everyone).
  bool arrive(int rank, const at::Tensor& input) {
    std::unique_lock lock(mutex_);
    posted_[rank] = input;
    return rendezvous(lock);
  }
  bool depart() {
    std::unique_lock lock(mutex_);
    return rendezvous(lock);
  }
  std::vector<at::Tensor> inputs() {
    std::lock_guard lock(mutex_);
    return posted_;
  }

 private:
  bool rendezvous(std::unique_lock<std::mutex>& lock) {
    ZT_CHECK(!broken_, CommError, "the in-process world is broken by an earlier timeout");
    const int64_t generation = generation_;
    if (++arrived_ == world_size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    if (cv_.wait_for(lock, timeout_, [&] { return generation_ != generation || broken_; }) && !broken_) return true;
    broken_ = true;
    cv_.notify_all();
    return false;
  }

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<at::Tensor> posted_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  bool broken_ = false;
};

at::ScalarType accumulate_type(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
}

// The reduction of `parts` (same shape) in rank order, in `dtype`.
at::Tensor reduce(const std::vector<at::Tensor>& parts, ReduceOp op, at::ScalarType dtype) {
  at::Tensor acc = parts[0].to(accumulate_type(dtype), /*non_blocking=*/false, /*copy=*/true);
  for (size_t r = 1; r < parts.size(); ++r) {
    if (op == ReduceOp::kMax) {
      acc = at::maximum(acc, parts[r].to(acc.scalar_type()));
    } else {
      acc.add_(parts[r].to(acc.scalar_type()));
    }
  }
  if (op == ReduceOp::kAvg) {
    const int64_t n = static_cast<int64_t>(parts.size());
    acc = at::isFloatingType(acc.scalar_type()) ? acc.div(n) : at::div(acc, n, "trunc");
  }
  return acc.to(dtype);
}

class ThreadsBackend final : public Backend {
 public:
  ThreadsBackend(std::shared_ptr<ThreadWorld> world, std::shared_ptr<LocalBoard> board, int rank)
      : world_(std::move(world)), board_(std::move(board), rank), rank_(rank) {}

  BackendKind kind() const override { return BackendKind::kThreads; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_->world_size(); }
  bool reduces(at::ScalarType) const override { return true; }
  bool averages(at::ScalarType) const override { return true; }
  ProgressBoard& progress() override { return board_; }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    return run(tensor, [&](const std::vector<at::Tensor>& all) { return reduce(all, op, tensor.scalar_type()); },
               tensor);
  }
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override {
    const int64_t n = output.numel();
    return run(input, [&](const std::vector<at::Tensor>& all) {
      std::vector<at::Tensor> mine;
      for (const auto& t : all) mine.push_back(t.narrow(0, rank_ * n, n));
      return reduce(mine, op, input.scalar_type());
    }, output);
  }
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override {
    return run(input, [&](const std::vector<at::Tensor>& all) { return at::cat(all); }, output);
  }
  WorkPtr broadcast(const at::Tensor& tensor, int root) override {
    return run(tensor, [&](const std::vector<at::Tensor>& all) { return all[root].clone(); }, tensor);
  }
  WorkPtr barrier() override {
    auto none = at::empty({0});
    return run(none, [&](const std::vector<at::Tensor>&) { return none; }, none);
  }

 private:
  template <class Compute>
  WorkPtr run(const at::Tensor& input, Compute compute, const at::Tensor& output) {
    try {
      if (!world_->arrive(rank_, input)) return std::make_shared<TimedOutWork>();
      at::Tensor result = compute(world_->inputs());
      if (!world_->depart()) return std::make_shared<TimedOutWork>();
      if (output.numel() > 0) output.copy_(result);
      return std::make_shared<DoneWork>();
    } catch (...) {
      return std::make_shared<FailedWork>(std::current_exception());
    }
  }

  std::shared_ptr<ThreadWorld> world_;
  RankBoard board_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Backend>> make_thread_backends(int world_size, const CommOptions& options) {
  auto world = std::make_shared<ThreadWorld>(world_size, options.timeout);
  auto board = std::make_shared<LocalBoard>(world_size);
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < world_size; ++r) backends.push_back(std::make_unique<ThreadsBackend>(world, board, r));
  return backends;
}

std::unique_ptr<Backend> make_threads_backend(const RendezvousInfo& where, const CommOptions& options) {
  ZT_CHECK(where.world_size == 1, ConfigError, "the threads backend joins threads of one process "
           "(Communicator::make_thread_world); a job of ", where.world_size, " processes needs gloo or mpi");
  return std::move(make_thread_backends(1, options).front());
}

}  // namespace zerotrain::comm::detail
