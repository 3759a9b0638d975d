#include "zerotrain/monitor/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"

namespace zerotrain::monitor {

AppendFile::AppendFile(std::filesystem::path path, Mode mode) : path_(std::move(path)) {
  // The output policy (core/output_path.h): a FIFO, a device, a link or an input of the run
  // is refused, never opened or appended to.
  fd_ = files::open_output_file(path_, mode == Mode::kAppend ? files::OpenMode::kAppend : files::OpenMode::kCreateNew,
                                {.what = "metrics file"});
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("stat", errno);
  size_bytes_ = static_cast<int64_t>(st.st_size);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::fail(const char* action, int error) const {
  throw IoError(detail::str("cannot ", action, " metrics file ", path_.string(), ": ", std::strerror(error),
                            error == ENOSPC ? " (the device is full; free space or write the metrics elsewhere)"
                            : error == EACCES || error == EROFS
                                ? " (choose a writable folder for the metrics)"
                                : ""));
}

void AppendFile::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    bytes.remove_prefix(static_cast<size_t>(n));
    size_bytes_ += n;
  }
}

void AppendFile::sync() {
  // A character device (/dev/null) cannot be synced; that is not a failure.
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS) fail("write", errno);
}

void create_directories(const std::filesystem::path& dir, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw IoError(detail::str("cannot create the ", what, " folder ", dir.string(), ": ", ec.message(),
                              " (choose a writable folder for the metrics)"));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    throw IoError(detail::str("the ", what, " folder ", dir.string(),
                              " exists and is not a folder; remove it or choose another path"));
  }
}

}  // namespace zerotrain::monitor
