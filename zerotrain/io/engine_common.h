// Internal to zerotrain/io: what the three engines share. A request is cut into pieces of
// block_size bytes; pieces wait in one queue; worker threads each drive a Backend (an
// io_uring ring, a libaio context, or blocking pread/pwrite) with up to `depth` pieces in
// flight. Workers are the engine's own threads, so IO progresses while the caller computes
// and no completion thread is needed: the worker that submitted a piece reaps it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/io/io_engine.h"

namespace zerotrain::io::detail {

struct TicketState;

// One piece of a request; `done_bytes` grows as short transfers are resubmitted.
struct Piece {
  TicketState* ticket = nullptr;
  int fd = -1;
  const std::string* path = nullptr;
  int64_t offset_bytes = 0;
  char* buffer = nullptr;
  int64_t nbytes = 0;
  int64_t done_bytes = 0;
  int retries = 0;   // EINTR/EAGAIN restarts, bounded so that a stuck device cannot spin forever
  bool write = false;

  int64_t next_offset() const { return offset_bytes + done_bytes; }
  char* next_buffer() const { return buffer + done_bytes; }
  int64_t remaining() const { return nbytes - done_bytes; }
};

struct TicketState {
  std::vector<Piece> pieces;          // never resized after submit: backends hold Piece*
  int64_t pieces_left = 0;            // guarded by the engine's ticket mutex
  std::string error;                  // the first failure; guarded likewise
  std::atomic<bool> failed{false};    // read unlocked, to cancel pieces not yet started
};

// What a backend reports for one piece: the bytes moved, or -errno.
struct Completion {
  Piece* piece;
  int64_t result;
};

// Moves pieces for one worker thread. Only that thread calls it.
class Backend {
 public:
  virtual ~Backend() = default;
  // Starts the remaining part of each piece. A piece that cannot be started is reported by
  // the next reap() as a completion with -errno, so the worker has one path for failures.
  virtual void start(Piece* const* pieces, size_t count) = 0;
  // Blocks until at least one started piece has completed and appends the completions.
  // Throws IoError (wait_failure_message) when the wait itself fails: the pieces started
  // are then lost to this backend, and the worker fails them and uses it no more.
  virtual void reap(std::vector<Completion>& out) = 0;
};

// The IoError text for a failed wait for completions: `call` and the errno, with what to do.
std::string wait_failure_message(const char* call, int err);

// Test seam: while set to an errno (not 0), the io_uring and libaio backends' waits for
// completions fail with it instead of calling the kernel, since a real io_uring_wait_cqe
// or io_getevents failure cannot be provoked from outside. Only tests set it.
void set_wait_failure_for_testing(int err);
int wait_failure_for_testing();

using BackendFactory = std::function<std::unique_ptr<Backend>()>;

// The engine: a ticket table, a queue of pieces and `workers` threads, each with its own
// Backend holding at most `depth` pieces in flight. Backends are built in the constructor,
// so a kernel that refuses io_uring or libaio fails make_io_engine(), not a worker.
class QueuedEngine final : public IoEngine {
 public:
  QueuedEngine(EngineKind kind, const AioOptions& options, int64_t workers, int64_t depth,
               const BackendFactory& make_backend);
  // Drains every queued and in-flight piece (the caller's buffers stay in use until then).
  ~QueuedEngine() override;
  EngineKind kind() const override { return kind_; }
  Ticket submit(const Request& request) override;
  void wait(Ticket ticket) override;
  void wait_all() override;

 private:
  void run_worker(Backend& backend);
  // Returns true when the piece must be started again (a short transfer, EINTR).
  bool on_completion(const Completion& c);
  void finish_piece(Piece& piece, const std::string& error);
  // After a failed wait: every piece in `flying` fails with `error`, and is forgotten.
  void fail_in_flight(std::vector<Piece*>& flying, const std::string& error);

  const EngineKind kind_;
  const AioOptions options_;
  const int64_t depth_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Piece*> queue_;
  bool stop_ = false;

  std::mutex tickets_mu_;
  std::condition_variable tickets_cv_;
  std::map<Ticket, std::unique_ptr<TicketState>> tickets_;
  Ticket next_ticket_ = 1;

  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::thread> workers_;
};

// UsageError unless the request is whole and aligned for O_DIRECT.
void check_request(const Request& request);

// The IoError text for a piece that failed with `err` (an errno), with a fix where one exists.
std::string errno_message(const Piece& piece, int err);

// Each engine's file provides these. make_* throws NotSupported (with the reason) when this
// build or this kernel cannot run it.
std::unique_ptr<IoEngine> make_uring_engine(const AioOptions& options);
std::unique_ptr<IoEngine> make_libaio_engine(const AioOptions& options);
std::unique_ptr<IoEngine> make_threads_engine(const AioOptions& options);

// UsageError unless `options` are within the bounds the config schema declares for the aio
// block (config::AioConfig): make_io_engine() and aio_options() both check with it.
void check_options(const AioOptions& options);
EngineProbe probe_uring();
EngineProbe probe_libaio();
EngineProbe probe_threads();

}  // namespace zerotrain::io::detail
