#include "zerotrain/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zerotrain::files {
namespace {

using detail::str;

std::string open_problem(int error) {
  switch (error) {
    case ENOENT: return "no such file";
    case EACCES: return "permission denied";
    case ELOOP: return "is a symlink loop (too many levels of symbolic links)";
    case ENOTDIR: return "a component of the path is not a directory";
    default: return "cannot be opened: " + describe_errno(error);
  }
}

}  // namespace

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  if (S_ISLNK(mode)) return "is a symbolic link";
  if (S_ISREG(mode)) return "is a regular file";
  return "is not a regular file";
}

ReadError::ReadError(std::filesystem::path path, std::string problem, int error_number)
    : IoError(path.string() + ": " + problem),
      path_(std::move(path)),
      problem_(std::move(problem)),
      error_number_(error_number) {}

std::string describe_errno(int error_number) {
  std::string text = std::strerror(error_number);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* name = ::strerrorname_np(error_number)) text += str(" (", name, ")");
#endif
  if (error_number == EIO) text += "; the disk or file system failed to deliver the data (see `dmesg`)";
  return text;
}

InputFile::InputFile(std::filesystem::path path, const InputFileOptions& options) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    throw ReadError(path_, open_problem(error), error);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    ::close(fd_);
    throw ReadError(path_, "cannot be examined (fstat): " + describe_errno(error), error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw ReadError(path_, str(file_kind(st.st_mode), "; give the path of a ", options.what), 0);
  }
  size_ = st.st_size;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), position_(other.position_) {
  other.fd_ = -1;
}

void throw_read_error(const std::filesystem::path& path, int error_number, int64_t offset) {
  throw ReadError(path, str("cannot be read at byte ", offset, ": ", describe_errno(error_number)), error_number);
}

void read_exactly_at(int fd, const std::filesystem::path& path, int64_t size_at_open, int64_t offset, void* out,
                     int64_t nbytes) {
  char* p = static_cast<char*>(out);
  for (int64_t done = 0; done < nbytes;) {
    // A single pread(2) moves at most about 2 GiB.
    const ssize_t n =
        ::pread(fd, p + done, static_cast<size_t>(std::min<int64_t>(nbytes - done, int64_t{1} << 30)), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_read_error(path, errno, offset + done);
    if (n == 0) {
      throw ReadError(path, str("ended at byte ", offset + done, " while bytes ", offset, "..", offset + nbytes,
                                " were read, though it was ", size_at_open,
                                " bytes when opened; it shrank while being read (is another program writing it?)"),
                      0);
    }
    done += n;
  }
}

void InputFile::fail_read(int error_number, int64_t offset) const { throw_read_error(path_, error_number, offset); }

int64_t InputFile::read_up_to(void* out, int64_t nbytes) {
  char* p = static_cast<char*>(out);
  int64_t done = 0;
  while (done < nbytes) {
    const ssize_t n = ::read(fd_, p + done, static_cast<size_t>(std::min<int64_t>(nbytes - done, int64_t{1} << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_read(errno, position_);
    if (n == 0) break;
    done += n;
    position_ += n;
  }
  return done;
}

void InputFile::read_at(int64_t offset, void* out, int64_t nbytes) const {
  read_exactly_at(fd_, path_, size_, offset, out, nbytes);
}

std::string InputFile::read_all(int64_t max_bytes) {
  std::string text;
  text.reserve(static_cast<size_t>(std::min(size_, max_bytes) + 1));
  // Read to the end, not to size(): the file may grow or shrink while it is read, and a
  // file of /proc reports size 0.
  constexpr int64_t kChunkBytes = int64_t{1} << 20;
  while (static_cast<int64_t>(text.size()) <= max_bytes) {
    const size_t at = text.size();
    const int64_t want = std::min(kChunkBytes, max_bytes + 1 - static_cast<int64_t>(at));
    text.resize(at + static_cast<size_t>(want));
    const int64_t got = read_up_to(text.data() + at, want);
    text.resize(at + static_cast<size_t>(got));
    if (got < want) break;
  }
  return text;
}

}  // namespace zerotrain::files
