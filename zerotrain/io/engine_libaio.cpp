// The libaio engine (DeepSpeed's choice): one kernel AIO context per thread of the aio
// block, queue_depth iocbs each, io_submit and io_getevents. Whether the kernel allows
// io_setup (containers may not; fs.aio-max-nr may be used up) is asked at run time.
#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"
#include "zerotrain/io/engine_common.h"

#ifdef ZEROTRAIN_HAVE_LIBAIO
#include <libaio.h>
#endif

namespace zerotrain::io::detail {

#ifdef ZEROTRAIN_HAVE_LIBAIO
namespace {

std::string refused(int err) {
  return zerotrain::detail::str("the kernel refuses io_setup: ", std::strerror(err),
                                err == EAGAIN ? " (fs.aio-max-nr is used up: raise it with sysctl, or lower "
                                                "aio.queue_depth x aio.intra_op_parallelism)"
                                              : "");
}

class LibaioBackend final : public Backend {
 public:
  explicit LibaioBackend(int64_t depth) : slots_(static_cast<size_t>(depth)), events_(static_cast<size_t>(depth)) {
    const int rc = io_setup(static_cast<int>(depth), &ctx_);
    if (rc < 0) throw NotSupported("io engine libaio cannot run here: " + refused(-rc));
    for (auto& s : slots_) free_.push_back(&s);
  }
  ~LibaioBackend() override { io_destroy(ctx_); }

  void start(Piece* const* pieces, size_t count) override {
    std::vector<iocb*> batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      Piece* p = pieces[i];
      ZT_INTERNAL_ASSERT(!free_.empty(), "libaio: more pieces in flight than the queue depth");
      Slot* s = free_.back();
      free_.pop_back();
      if (p->write) {
        io_prep_pwrite(&s->cb, p->fd, p->next_buffer(), static_cast<size_t>(p->remaining()), p->next_offset());
      } else {
        io_prep_pread(&s->cb, p->fd, p->next_buffer(), static_cast<size_t>(p->remaining()), p->next_offset());
      }
      s->cb.data = s;
      s->piece = p;
      batch.push_back(&s->cb);
    }
    size_t submitted = 0;
    int busy = 0;
    while (submitted < batch.size()) {
      const int rc = io_submit(ctx_, static_cast<long>(batch.size() - submitted), batch.data() + submitted);
      if (rc > 0) {
        submitted += static_cast<size_t>(rc);
        continue;
      }
      if ((rc == -EINTR || rc == -EAGAIN) && ++busy < 1000) continue;
      // Not queued in the kernel: these pieces fail now (EAGAIN is retried by the worker).
      for (size_t i = submitted; i < batch.size(); ++i) {
        Slot* s = static_cast<Slot*>(batch[i]->data);
        failed_.push_back({s->piece, rc == 0 ? -EAGAIN : rc});
        free_.push_back(s);
      }
      break;
    }
  }

  void reap(std::vector<Completion>& out) override {
    if (!failed_.empty()) {
      out.insert(out.end(), failed_.begin(), failed_.end());
      failed_.clear();
      return;
    }
    int n;
    do {
      const int injected = wait_failure_for_testing();
      n = injected != 0 ? -injected : io_getevents(ctx_, 1, static_cast<long>(events_.size()), events_.data(), nullptr);
    } while (n == -EINTR);
    if (n < 0) throw IoError(wait_failure_message("io_getevents", -n));
    for (int i = 0; i < n; ++i) {
      Slot* s = static_cast<Slot*>(events_[static_cast<size_t>(i)].data);
      // res is the byte count, or -errno stored in an unsigned long.
      out.push_back({s->piece, static_cast<int64_t>(static_cast<long>(events_[static_cast<size_t>(i)].res))});
      free_.push_back(s);
    }
  }

 private:
  struct Slot {
    iocb cb{};
    Piece* piece = nullptr;
  };
  io_context_t ctx_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<Slot*> free_;
  std::vector<io_event> events_;
  std::vector<Completion> failed_;
};

}  // namespace

std::unique_ptr<IoEngine> make_libaio_engine(const AioOptions& options) {
  return std::make_unique<QueuedEngine>(EngineKind::kLibaio, options, options.threads, options.queue_depth,
                                        [&] { return std::make_unique<LibaioBackend>(options.queue_depth); });
}

EngineProbe probe_libaio() {
  io_context_t ctx = nullptr;
  const int rc = io_setup(8, &ctx);
  if (rc < 0) return {EngineKind::kLibaio, false, "libaio built in, but " + refused(-rc)};
  io_destroy(ctx);
  return {EngineKind::kLibaio, true, "libaio, the kernel accepts io_setup"};
}

#else

std::unique_ptr<IoEngine> make_libaio_engine(const AioOptions&) {
  throw NotSupported("io engine libaio is not in this build: install libaio-dev (scripts/setup.sh does) and rebuild");
}

EngineProbe probe_libaio() {
  return {EngineKind::kLibaio, false, "not built: libaio-dev was not found at configure time"};
}

#endif

}  // namespace zerotrain::io::detail
