#include "zerotrain/core/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"

namespace zerotrain::files {
namespace {

using detail::str;

// What a non-regular file is, in words a user recognises.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

std::string open_problem(int error) {
  switch (error) {
    case ENOENT: return "no such file";
    case EACCES: return "permission denied";
    case ELOOP: return "is a symlink loop (too many levels of symbolic links)";
    case ENOTDIR: return "a component of the path is not a directory";
    default: return std::strerror(error);
  }
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TextFile read_text_file(const std::filesystem::path& path, const TextFileOptions& options) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  Fd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) return {std::nullopt, open_problem(errno)};
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return {std::nullopt, open_problem(errno)};
  if (!S_ISREG(st.st_mode)) return {std::nullopt, str(kind_of(st.st_mode), "; give the path of a ", options.what)};
  auto too_large = [&](int64_t bytes) {
    return str("is ", bytes, " bytes, more than the ", options.max_bytes, " bytes a ", options.what,
               " may have; is it the right file?");
  };
  if (st.st_size > options.max_bytes) return {std::nullopt, too_large(st.st_size)};
  // Read to the end, not to st_size: the file may grow while it is read (a file of /proc
  // reports size 0). The limit still holds.
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return {std::nullopt, str("cannot be read: ", std::strerror(errno))};
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > options.max_bytes) {
      return {std::nullopt, too_large(static_cast<int64_t>(text.size()))};
    }
  }
  return {std::move(text), {}};
}

}  // namespace zerotrain::files
