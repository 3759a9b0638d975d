#include "zerotrain/core/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"

namespace zerotrain::files {

OutputFile::OutputFile(std::filesystem::path path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("open", errno);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::fail(const char* action, int error) const {
  throw IoError(detail::str("cannot ", action, " ", what_, " ", path_.string(), ": ", std::strerror(error),
                            error == ENOSPC ? " (the device is full; free space or write elsewhere)" : ""));
}

void OutputFile::write(std::string_view text) {
  ZT_INTERNAL_ASSERT(fd_ >= 0, what_, " written after close()");
  while (!text.empty()) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void OutputFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  // A character device (/dev/null, a terminal) cannot be synced; that is not a failure.
  if (::fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int error = errno;
    ::close(fd);
    fail("write", error);
  }
  if (::close(fd) != 0) fail("write", errno);
}

}  // namespace zerotrain::files
