#include "zerotrain/io/engine_common.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"

namespace zerotrain::io::detail {
namespace {

// A piece restarted this many times for EINTR/EAGAIN without progress is a failure.
constexpr int kMaxRetries = 1000;

std::string describe(const Piece& p) {
  return zerotrain::detail::str(p.nbytes, " bytes at offset ", p.offset_bytes, " of ", *p.path);
}

std::atomic<int> g_wait_failure_for_testing{0};

}  // namespace

std::string wait_failure_message(const char* call, int err) {
  return zerotrain::detail::str(call, " failed: ", std::strerror(err), " (errno ", err,
                                "; the kernel's wait for completions failed, so the IO engine's worker gave up "
                                "its transfers in flight and fails the ones it takes later: check the kernel "
                                "log, dmesg, and restart the run, or set ZEROTRAIN_IO_ENGINE=threads)");
}

void set_wait_failure_for_testing(int err) { g_wait_failure_for_testing.store(err); }
int wait_failure_for_testing() { return g_wait_failure_for_testing.load(std::memory_order_relaxed); }

void check_request(const Request& r) {
  ZT_CHECK(r.file != nullptr && r.file->fd() >= 0, UsageError,
           "IO request without an open file: open it with DirectFile::open first");
  ZT_CHECK(r.buffer != nullptr || r.nbytes == 0, UsageError, "IO request on ", r.file->path(),
           " without a buffer: pass an AlignedBuffer's data()");
  ZT_CHECK(r.offset_bytes >= 0 && r.offset_bytes % kAlignmentBytes == 0, UsageError, "IO request on ",
           r.file->path(), ": offset ", r.offset_bytes, " is not a multiple of ", kAlignmentBytes,
           " bytes (O_DIRECT needs aligned offsets; round with io::align_up)");
  ZT_CHECK(r.nbytes >= 0 && r.nbytes % kAlignmentBytes == 0, UsageError, "IO request on ", r.file->path(),
           ": length ", r.nbytes, " is not a multiple of ", kAlignmentBytes,
           " bytes (O_DIRECT needs aligned lengths; pad the tensor with io::align_up)");
  ZT_CHECK(reinterpret_cast<uintptr_t>(r.buffer) % kAlignmentBytes == 0, UsageError, "IO request on ",
           r.file->path(), ": buffer address ", r.buffer, " is not aligned to ", kAlignmentBytes,
           " bytes (O_DIRECT needs aligned memory; use io::AlignedBuffer)");
  ZT_CHECK(!r.write || r.file->mode() != DirectFile::Mode::kRead, UsageError, "cannot write to ",
           r.file->path(), ": it was opened for reading; open it with Mode::kReadWrite or kCreate");
}

std::string errno_message(const Piece& p, int err) {
  std::string text = zerotrain::detail::str("cannot ", p.write ? "write " : "read ", describe(p), ": ",
                                            std::strerror(err));
  switch (err) {
    case ENOSPC:
      return text + " (the disk is full: free disk space or point nvme_path at a bigger disk)";
    case EDQUOT:
      return text + " (the disk quota is used up: free space in it or point nvme_path at another disk)";
    case EFBIG:
      return text + " (the file would pass the largest size allowed, by the process's file size limit "
                    "`ulimit -f` or by the file system: raise the limit or point nvme_path at another disk)";
    case EIO:
      return text + " (the device reported an error: check the disk and the kernel log, dmesg)";
    case EINVAL:
      return text + " (the kernel refused the direct transfer: the device's logical block may be larger than " +
             std::to_string(kAlignmentBytes) + " bytes or the file system may not support O_DIRECT; point "
             "nvme_path at a local ext4 or xfs disk)";
    case EBADF:
      return text + " (the file was closed or not opened for this: keep the DirectFile open until wait())";
    case EAGAIN:
      return text + " (the kernel kept refusing the request as busy: lower aio.queue_depth or "
                    "aio.intra_op_parallelism)";
    default:
      return text;
  }
}

QueuedEngine::QueuedEngine(EngineKind kind, const AioOptions& options, int64_t workers, int64_t depth,
                           const BackendFactory& make_backend)
    : kind_(kind), options_(options), depth_(depth) {
  for (int64_t i = 0; i < workers; ++i) backends_.push_back(make_backend());
  for (auto& backend : backends_) workers_.emplace_back([this, b = backend.get()] { run_worker(*b); });
}

QueuedEngine::~QueuedEngine() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

Ticket QueuedEngine::submit(const Request& request) {
  check_request(request);
  auto state = std::make_unique<TicketState>();
  const int64_t block = options_.block_size_bytes;
  const int64_t count = (request.nbytes + block - 1) / block;
  state->pieces.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    Piece& p = state->pieces[static_cast<size_t>(i)];
    p.ticket = state.get();
    p.fd = request.file->fd();
    p.path = &request.file->path();
    p.offset_bytes = request.offset_bytes + i * block;
    p.buffer = static_cast<char*>(request.buffer) + i * block;
    p.nbytes = std::min(block, request.nbytes - i * block);
    p.write = request.write;
  }
  state->pieces_left = count;
  TicketState* raw = state.get();
  Ticket ticket;
  {
    std::lock_guard<std::mutex> lock(tickets_mu_);
    ticket = next_ticket_++;
    tickets_.emplace(ticket, std::move(state));
  }
  if (count > 0) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      for (Piece& p : raw->pieces) queue_.push_back(&p);
    }
    queue_cv_.notify_all();
  }
  return ticket;
}

void QueuedEngine::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(tickets_mu_);
  auto it = tickets_.find(ticket);
  ZT_CHECK(it != tickets_.end(), UsageError, "IO ticket ", ticket,
           " is not pending: each ticket is waited for once, by wait() or wait_all()");
  TicketState* state = it->second.get();
  tickets_cv_.wait(lock, [&] { return state->pieces_left == 0; });
  std::string error = std::move(state->error);
  tickets_.erase(it);
  lock.unlock();
  if (!error.empty()) throw IoError(error);
}

void QueuedEngine::wait_all() {
  std::unique_lock<std::mutex> lock(tickets_mu_);
  tickets_cv_.wait(lock, [&] {
    return std::all_of(tickets_.begin(), tickets_.end(), [](const auto& t) { return t.second->pieces_left == 0; });
  });
  std::string error;   // the first by ticket number
  for (auto& [ticket, state] : tickets_) {
    if (error.empty() && !state->error.empty()) error = std::move(state->error);
  }
  tickets_.clear();
  lock.unlock();
  if (!error.empty()) throw IoError(error);
}

void QueuedEngine::finish_piece(Piece& piece, const std::string& error) {
  TicketState& t = *piece.ticket;
  bool done;
  {
    std::lock_guard<std::mutex> lock(tickets_mu_);
    if (!error.empty()) {
      if (t.error.empty()) t.error = error;
      t.failed.store(true, std::memory_order_relaxed);
    }
    done = --t.pieces_left == 0;
  }
  if (done) tickets_cv_.notify_all();
}

bool QueuedEngine::on_completion(const Completion& c) {
  Piece& p = *c.piece;
  if ((c.result == -EINTR || c.result == -EAGAIN) && ++p.retries < kMaxRetries) return true;
  if (c.result < 0) {
    finish_piece(p, errno_message(p, static_cast<int>(-c.result)));
    return false;
  }
  p.done_bytes += c.result;
  if (p.remaining() == 0) {
    finish_piece(p, {});
    return false;
  }
  // A transfer that stopped short: go on from where it stopped. With O_DIRECT a read stops
  // short only at the end of the file, so the next read returns 0 and reports it; a stop at
  // an unaligned position cannot be continued with O_DIRECT, so it is reported at once.
  if (c.result > 0 && p.next_offset() % kAlignmentBytes == 0) return true;
  if (p.write) {
    finish_piece(p, zerotrain::detail::str("short write: wrote ", p.done_bytes, " of ", p.nbytes,
                                           " bytes at offset ", p.offset_bytes, " of ", *p.path,
                                           " (the disk may be full or the file size limit reached: free disk "
                                           "space or point nvme_path at a bigger disk)"));
  } else {
    finish_piece(p, zerotrain::detail::str("short read: got ", p.done_bytes, " of ", p.nbytes,
                                           " bytes at offset ", p.offset_bytes, " of ", *p.path,
                                           " (the file is shorter than expected: was it truncated or written "
                                           "by another run?)"));
  }
  return false;
}

void QueuedEngine::fail_in_flight(std::vector<Piece*>& flying, const std::string& error) {
  for (Piece* p : flying) {
    finish_piece(*p, zerotrain::detail::str("cannot ", p->write ? "write " : "read ", describe(*p), ": ", error));
  }
  flying.clear();
}

void QueuedEngine::run_worker(Backend& backend) {
  // The pieces this worker has started and not yet finished: when the wait for completions
  // fails, each of them gets the error, so that no wait() hangs on a piece nobody reaps.
  std::vector<Piece*> flying;
  std::string broken;   // the failed wait's error: the backend is used no more
  std::vector<Piece*> batch;
  std::vector<Completion> done;
  for (;;) {
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      if (flying.empty()) {
        queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;   // stopping, and nothing is left to do
      }
      // overlap_events: refill each slot as soon as it frees; otherwise start a new batch
      // only when the previous one has completed (DeepSpeed's overlap_events=false).
      if (options_.overlap_events || flying.empty()) {
        while (static_cast<int64_t>(flying.size() + batch.size()) < depth_ && !queue_.empty()) {
          batch.push_back(queue_.front());
          queue_.pop_front();
        }
      }
    }
    // The rest of a request that already failed is not started: its wait() throws anyway,
    // and sooner.
    size_t kept = 0;
    for (Piece* p : batch) {
      if (p->ticket->failed.load(std::memory_order_relaxed)) {
        finish_piece(*p, {});
      } else {
        batch[kept++] = p;
      }
    }
    batch.resize(kept);
    if (!broken.empty()) {
      fail_in_flight(batch, broken);
      continue;
    }
    if (!batch.empty()) {
      if (options_.single_submit) {
        for (Piece* p : batch) backend.start(&p, 1);
      } else {
        backend.start(batch.data(), batch.size());
      }
      flying.insert(flying.end(), batch.begin(), batch.end());
    }
    if (flying.empty()) continue;
    done.clear();
    try {
      backend.reap(done);
    } catch (const IoError& e) {
      broken = e.message();
      fail_in_flight(flying, broken);
      continue;
    }
    for (const Completion& c : done) {
      if (on_completion(c)) {
        Piece* p = c.piece;
        backend.start(&p, 1);
      } else {
        flying.erase(std::find(flying.begin(), flying.end(), c.piece));
      }
    }
  }
}

}  // namespace zerotrain::io::detail
