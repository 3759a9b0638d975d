// The io_uring engine (liburing): one ring per thread of the aio block, queue_depth entries.
// Containers often forbid io_uring_setup (seccomp: EPERM; old kernels: ENOSYS), so whether
// it runs is asked of the kernel at run time, not assumed from the build.
#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"
#include "zerotrain/io/engine_common.h"

#ifdef ZEROTRAIN_HAVE_LIBURING
#include <liburing.h>
#endif

namespace zerotrain::io::detail {

#ifdef ZEROTRAIN_HAVE_LIBURING
namespace {

std::string refused(int err) {
  return zerotrain::detail::str("the kernel refuses io_uring_setup: ", std::strerror(err),
                                err == EPERM || err == EACCES
                                    ? " (containers often forbid io_uring with seccomp, or kernel.io_uring_disabled is set)"
                                    : "");
}

class UringBackend final : public Backend {
 public:
  explicit UringBackend(int64_t depth) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth), &ring_, 0);
    if (rc < 0) throw NotSupported("io engine io_uring cannot run here: " + refused(-rc));
  }
  ~UringBackend() override { io_uring_queue_exit(&ring_); }

  void start(Piece* const* pieces, size_t count) override {
    if (broken_ != 0) {   // see below: nothing more is submitted on this ring
      for (size_t i = 0; i < count; ++i) failed_.push_back({pieces[i], -broken_});
      return;
    }
    for (size_t i = 0; i < count; ++i) {
      Piece* p = pieces[i];
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      ZT_INTERNAL_ASSERT(sqe != nullptr, "io_uring submission queue full: more pieces in flight than its depth");
      if (p->write) {
        io_uring_prep_write(sqe, p->fd, p->next_buffer(), static_cast<unsigned>(p->remaining()),
                            static_cast<uint64_t>(p->next_offset()));
      } else {
        io_uring_prep_read(sqe, p->fd, p->next_buffer(), static_cast<unsigned>(p->remaining()),
                           static_cast<uint64_t>(p->next_offset()));
      }
      io_uring_sqe_set_data(sqe, p);
    }
    int rc;
    do {
      rc = io_uring_submit(&ring_);
    } while (rc == -EINTR || rc == -EAGAIN);
    if (rc < 0) {
      // The entries stay in the submission queue and liburing cannot take them back: this
      // ring submits nothing more, so the kernel never touches these pieces' buffers; they
      // and all later pieces of this worker fail with the error.
      broken_ = -rc;
      for (size_t i = 0; i < count; ++i) failed_.push_back({pieces[i], rc});
    }
  }

  void reap(std::vector<Completion>& out) override {
    if (!failed_.empty()) {
      out.insert(out.end(), failed_.begin(), failed_.end());
      failed_.clear();
      return;
    }
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
      const int injected = wait_failure_for_testing();
      rc = injected != 0 ? -injected : io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR || rc == -EAGAIN);
    if (rc < 0) throw IoError(wait_failure_message("io_uring_wait_cqe", -rc));
    io_uring_cqe* batch[64];
    const unsigned n = io_uring_peek_batch_cqe(&ring_, batch, 64);
    for (unsigned i = 0; i < n; ++i) {
      out.push_back({static_cast<Piece*>(io_uring_cqe_get_data(batch[i])), static_cast<int64_t>(batch[i]->res)});
    }
    io_uring_cq_advance(&ring_, n);
  }

 private:
  io_uring ring_{};
  int broken_ = 0;
  std::vector<Completion> failed_;
};

}  // namespace

std::unique_ptr<IoEngine> make_uring_engine(const AioOptions& options) {
  return std::make_unique<QueuedEngine>(EngineKind::kIoUring, options, options.threads, options.queue_depth,
                                        [&] { return std::make_unique<UringBackend>(options.queue_depth); });
}

EngineProbe probe_uring() {
  io_uring ring{};
  const int rc = io_uring_queue_init(8, &ring, 0);
  if (rc < 0) return {EngineKind::kIoUring, false, "liburing " ZEROTRAIN_LIBURING_VERSION " built in, but " + refused(-rc)};
  io_uring_queue_exit(&ring);
  return {EngineKind::kIoUring, true, "liburing " ZEROTRAIN_LIBURING_VERSION ", the kernel accepts io_uring_setup"};
}

#else

std::unique_ptr<IoEngine> make_uring_engine(const AioOptions&) {
  throw NotSupported("io engine io_uring is not in this build: install liburing-dev (scripts/setup.sh does) and rebuild");
}

EngineProbe probe_uring() {
  return {EngineKind::kIoUring, false, "not built: liburing-dev was not found at configure time"};
}

#endif

}  // namespace zerotrain::io::detail
