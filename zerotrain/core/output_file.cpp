#include "zerotrain/core/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "zerotrain/core/error.h"

namespace zerotrain::files {

void check_standard_output() {
  std::cout.flush();
  ZT_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good(), IoError,
           "cannot write the standard output: ", std::strerror(errno));
}

OutputFile::OutputFile(std::filesystem::path path, const OutputCheck& check)
    : path_(std::move(path)), what_(check.what) {
  fd_ = open_output_file(path_, OpenMode::kTruncate, check);
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
  // A file system that cannot sync (EINVAL) has nothing more to make durable; not a failure.
  if (::fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int error = errno;
    ::close(fd);
    fail("write", error);
  }
  if (::close(fd) != 0) fail("write", errno);
}

}  // namespace zerotrain::files
