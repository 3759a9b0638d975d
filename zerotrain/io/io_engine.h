// Asynchronous reads and writes of aligned buffers at file offsets, with O_DIRECT, for the
// NVMe offload of optimizer states and parameters (docs/io.md). Three engines behind one
// interface, chosen at run time: io_uring (liburing), libaio, and a pool of threads doing
// pread/pwrite. No LibTorch here.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace zerotrain::io {

// O_DIRECT needs the buffer address, the file offset and the length aligned to the
// device's logical block; 4096 covers every disk we meet.
inline constexpr int64_t kAlignmentBytes = 4096;
inline constexpr int64_t align_up(int64_t nbytes) { return (nbytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes; }

enum class EngineKind { kAuto, kIoUring, kLibaio, kThreads };
const char* engine_kind_name(EngineKind kind);   // "auto", "io_uring", "libaio", "threads"
// The kind of one of those names; UsageError naming the valid ones otherwise. `what` names
// where the text came from ("--engine", "ZEROTRAIN_IO_ENGINE").
EngineKind engine_kind_from_name(const std::string& name, const std::string& what);

// DeepSpeed's `aio` block (its keys and defaults: docs/io.md), in our units.
struct AioOptions {
  int64_t block_size_bytes = 1 << 20;   // a request is cut into pieces of this size
  int64_t queue_depth = 8;              // pieces in flight per thread
  int64_t threads = 1;                  // intra_op_parallelism: submitting threads
  bool single_submit = false;           // submit pieces one system call at a time
  bool overlap_events = true;           // submit new pieces while earlier ones complete
  EngineKind engine = EngineKind::kAuto;
};

// Memory aligned to kAlignmentBytes, its size rounded up to a multiple of it. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t nbytes);   // ResourceError when the memory cannot be had
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  void* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }   // rounded up

 private:
  void* data_ = nullptr;
  int64_t nbytes_ = 0;
};

// A file opened with O_DIRECT. Move-only; closes on destruction.
class DirectFile {
 public:
  enum class Mode { kCreate, kReadWrite, kRead };   // kCreate truncates or creates
  // IoError naming the path and the fix: missing directory, no permission, read-only file
  // system, or a file system that refuses O_DIRECT (tmpfs: "put nvme_path on a disk").
  static DirectFile open(const std::string& path, Mode mode);
  DirectFile() = default;
  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  ~DirectFile();

  // Reserves `nbytes` on disk now (fallocate), so that a full disk shows at setup as an
  // IoError naming the file, the bytes asked and the bytes free, not in the middle of a step.
  void reserve(int64_t nbytes);
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  Mode mode() const { return mode_; }   // writes to a kRead file are a UsageError at submit
  int64_t size_bytes() const;

 private:
  int fd_ = -1;
  std::string path_;
  Mode mode_ = Mode::kRead;
};

// One read or write. `offset_bytes`, `buffer` and `nbytes` are multiples of kAlignmentBytes
// (UsageError otherwise); the file and buffer must outlive the request's wait().
struct Request {
  const DirectFile* file = nullptr;
  int64_t offset_bytes = 0;
  void* buffer = nullptr;
  int64_t nbytes = 0;
  bool write = false;
};

using Ticket = uint64_t;

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  virtual EngineKind kind() const = 0;
  const char* name() const { return engine_kind_name(kind()); }
  // Starts `request` and returns at once; the engine makes progress on its own threads
  // while the caller computes.
  virtual Ticket submit(const Request& request) = 0;
  // Blocks until `ticket` is done. Throws IoError naming the file, the offset and the cause
  // (errno text, or "short read: got N of M bytes" when the file ends early). Each ticket
  // is waited for once.
  virtual void wait(Ticket ticket) = 0;
  // Waits for every ticket not yet waited for; throws the first error.
  virtual void wait_all() = 0;
  // Waits for each of `tickets`, all of them even when one fails (their buffers are free
  // afterwards), then throws the first error.
  void wait_each(const std::vector<Ticket>& tickets);
};

// An engine of `options.engine`; kAuto takes io_uring, else libaio, else threads (the first
// that this build has and this kernel allows). Naming an engine that cannot run is a
// NotSupported error saying why and which engines can.
std::unique_ptr<IoEngine> make_io_engine(const AioOptions& options);

// What `zerotrain report` prints: every engine, whether it runs here, and why not.
struct EngineProbe {
  EngineKind kind;
  bool available = false;
  std::string detail;   // "liburing 2.3, kernel accepts io_uring_setup" or why not
};
std::vector<EngineProbe> probe_engines();

}  // namespace zerotrain::io
