// The engine that always runs: blocking pread/pwrite on worker threads. A blocking call has
// one piece in flight per thread, so the engine runs threads x queue_depth workers to keep
// as many pieces in flight as the io_uring and libaio engines do with the same aio block.
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "zerotrain/io/engine_common.h"

namespace zerotrain::io::detail {
namespace {

// More workers than this only add context switches; a disk is saturated long before.
constexpr int64_t kMaxWorkers = 256;

class PreadBackend final : public Backend {
 public:
  void start(Piece* const* pieces, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      Piece* p = pieces[i];
      const ssize_t n = p->write ? ::pwrite(p->fd, p->next_buffer(), static_cast<size_t>(p->remaining()), p->next_offset())
                                 : ::pread(p->fd, p->next_buffer(), static_cast<size_t>(p->remaining()), p->next_offset());
      done_.push_back({p, n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n)});
    }
  }
  void reap(std::vector<Completion>& out) override {
    out.insert(out.end(), done_.begin(), done_.end());
    done_.clear();
  }

 private:
  std::vector<Completion> done_;
};

}  // namespace

std::unique_ptr<IoEngine> make_threads_engine(const AioOptions& options) {
  const int64_t workers = std::min(kMaxWorkers, options.threads * options.queue_depth);
  return std::make_unique<QueuedEngine>(EngineKind::kThreads, options, workers, 1,
                                        [] { return std::make_unique<PreadBackend>(); });
}

EngineProbe probe_threads() {
  return {EngineKind::kThreads, true, "pread/pwrite on threads x queue_depth worker threads (always available)"};
}

}  // namespace zerotrain::io::detail
