#include "zerotrain/checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/output_path.h"

namespace zerotrain::checkpoint {
namespace {

std::function<void(const std::filesystem::path&, int64_t)>& observer() {
  static std::function<void(const std::filesystem::path&, int64_t)> o;
  return o;
}

}  // namespace

std::string write_error_cause(int err) {
  switch (err) {
    case ENOSPC: return "the disk is full (ENOSPC)";
    case EDQUOT: return "the disk quota is exhausted (EDQUOT)";
    case EFBIG: return "the file is larger than the file-size limit allows (EFBIG; see `ulimit -f`)";
    case EACCES:
    case EPERM: return std::string(std::strerror(err)) + " (check the directory's permissions)";
    case EROFS: return "the file system is read-only (EROFS)";
    default: return std::strerror(err);
  }
}

namespace {

std::string cause(int err) { return write_error_cause(err); }

}  // namespace

Checksum::Checksum() : state_(XXH3_createState()) {
  ZT_CHECK(state_ != nullptr, ResourceError, "out of memory for a checksum state");
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}
Checksum::~Checksum() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Checksum::update(const void* data, int64_t nbytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, static_cast<size_t>(nbytes));
}
uint64_t Checksum::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

uint64_t checksum_of(const void* data, int64_t nbytes) { return XXH3_64bits(data, static_cast<size_t>(nbytes)); }

std::string to_hex(uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) s[i] = kDigits[value & 0xf];
  return s;
}

bool from_hex(std::string_view text, uint64_t& value) {
  if (text.size() != 16) return false;
  value = 0;
  for (char c : text) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    value = (value << 4) | static_cast<uint64_t>(d);
  }
  return true;
}

void set_write_observer(std::function<void(const std::filesystem::path&, int64_t)> o) { observer() = std::move(o); }

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  // A file above the file-size limit would otherwise kill the process with SIGXFSZ; ignored,
  // the write fails with EFBIG and the save reports it. A handler the program set is kept.
  struct sigaction current {};
  if (::sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGXFSZ, SIG_IGN);
  // The output policy (core/output_path.h): what the rename would replace must be a regular
  // file that is not an input of the run, or nothing; a link there is refused, not replaced.
  files::check_output_file(path_);
  ::unlink(tmp_.c_str());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ZT_CHECK(fd_ >= 0, IoError, "cannot create ", tmp_.string(), ": ", cause(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, int64_t nbytes) {
  ZT_INTERNAL_ASSERT(fd_ >= 0, "write after commit");
  // In pieces of a few MiB, each hashed right after it is written, while it is in cache.
  constexpr int64_t kPiece = int64_t{4} << 20;
  const char* p = static_cast<const char*>(data);
  for (int64_t left = nbytes; left > 0;) {
    const int64_t piece = std::min(left, kPiece);
    for (int64_t done = 0; done < piece;) {
      const ssize_t n = ::write(fd_, p + done, static_cast<size_t>(piece - done));
      if (n < 0 && errno == EINTR) continue;
      ZT_CHECK(n > 0, IoError, "cannot write ", tmp_.string(), " (", bytes_ + done, " bytes written): ",
               n < 0 ? cause(errno) : std::string("no progress"));
      done += n;
    }
    sum_.update(p, piece);
    p += piece;
    left -= piece;
    bytes_ += piece;
  }
  if (observer()) observer()(path_, bytes_);
}

void AtomicFile::commit() {
  ZT_INTERNAL_ASSERT(fd_ >= 0, "commit twice");
  ZT_CHECK(::fsync(fd_) == 0, IoError, "cannot flush ", tmp_.string(), " to disk: ", cause(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw IoError("cannot move " + tmp_.string() + " into place as " + path_.string() + ": " + cause(err));
  }
  fsync_directory(path_.parent_path().empty() ? std::filesystem::path(".") : path_.parent_path());
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ZT_CHECK(fd >= 0, IoError, "cannot open directory ", dir.string(), ": ", cause(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); their renames are durable anyway.
  ZT_CHECK(rc == 0 || err == EINVAL, IoError, "cannot flush directory ", dir.string(), ": ", cause(err));
}

ReadOnlyFile::ReadOnlyFile(std::filesystem::path path) : path_(std::move(path)) {
  // Opened the way every file a user names is (files::InputFile), then kept as a descriptor
  // of its own: a problem is a CheckpointError, with the file's words.
  try {
    const files::InputFile file(path_, {.what = "checkpoint file"});
    fd_ = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) files::throw_read_error(path_, errno, 0);
    size_ = file.size();
  } catch (const files::ReadError& e) {
    throw CheckpointError(e.error_number() == ENOENT ? path_.string() + ": missing" : e.message());
  }
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

void ReadOnlyFile::read_at(int64_t offset, void* out, int64_t nbytes) const {
  ZT_CHECK(offset >= 0 && nbytes >= 0 && offset <= size_ && nbytes <= size_ - offset, CheckpointError, path_.string(),
           ": bytes ", offset, "..", offset + nbytes, " are outside the file (", size_, " bytes; truncated?)");
  try {
    files::read_exactly_at(fd_, path_, size_, offset, out, nbytes);
  } catch (const files::ReadError& e) {
    throw CheckpointError(e.message());
  }
}

uint64_t ReadOnlyFile::checksum() const {
  Checksum sum;
  std::vector<char> block(std::min<int64_t>(size_, 8 << 20));
  for (int64_t at = 0; at < size_;) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(block.size()), size_ - at);
    read_at(at, block.data(), n);
    sum.update(block.data(), n);
    at += n;
  }
  return sum.digest();
}

}  // namespace zerotrain::checkpoint
