// Opening files for O_DIRECT, with errors that say what to change.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "zerotrain/core/error.h"
#include "zerotrain/io/io_engine.h"
#include "zerotrain/io/offload_dir.h"

namespace zerotrain::io {
namespace {

std::string parent_dir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

const char* purpose(DirectFile::Mode mode) { return mode == DirectFile::Mode::kRead ? "reading" : "writing"; }

[[noreturn]] void throw_open_error(const std::string& path, DirectFile::Mode mode, int err) {
  const std::string head = detail::str("cannot open ", path, " for ", purpose(mode), " (O_DIRECT): ", std::strerror(err));
  std::string fix;
  switch (err) {
    case ENOENT:
      if (!std::filesystem::is_directory(parent_dir(path))) {
        fix = "the directory " + parent_dir(path) + " does not exist: create it, or point nvme_path at an existing one";
      } else {
        fix = "the file does not exist: was it written by this run, or removed since?";
      }
      break;
    case EACCES:
    case EPERM:
      fix = "this user may not " + std::string(mode == DirectFile::Mode::kRead ? "read it" : "write there") +
            ": fix the permissions, or point nvme_path at a directory this user owns";
      break;
    case EROFS:
      fix = "the file system is read-only: point nvme_path at a writable disk";
      break;
    case EINVAL:
      // Linux answers EINVAL, not EISDIR, for a directory opened with O_DIRECT.
      fix = std::filesystem::is_directory(path) ? "it is a directory: give the path of a file"
                                                : "the file system refuses O_DIRECT: point nvme_path at a local disk (ext4, xfs)";
      break;
    case EISDIR:
      fix = "it is a directory: give the path of a file";
      break;
    case ENOTDIR:
      fix = "a part of the path is not a directory";
      break;
    case ELOOP:
      fix = "it is a symbolic link, which zerotrain does not write through: remove it";
      break;
    case EMFILE:
    case ENFILE:
      fix = "too many open files: raise the limit (ulimit -n)";
      break;
    case ENOSPC:
    case EDQUOT:
      fix = "the disk is full: free disk space or point nvme_path at a bigger disk";
      break;
    default:
      break;
  }
  throw IoError(fix.empty() ? head : head + " (" + fix + ")");
}

void refuse_memory_file_system(const std::string& path, DirectFile::Mode mode) {
  const std::string problem = memory_file_system_problem(parent_dir(path));
  if (!problem.empty()) {
    throw IoError(detail::str("cannot open ", path, " for ", purpose(mode), " (O_DIRECT): ", problem));
  }
}

}  // namespace

DirectFile DirectFile::open(const std::string& path, Mode mode) {
  ZT_CHECK(!path.empty(), UsageError, "DirectFile::open: empty path; give the path of a file on a disk");
  refuse_memory_file_system(path, mode);
  int flags = O_DIRECT | O_CLOEXEC;
  switch (mode) {
    // The file's name is zerotrain's: a link there is refused (ELOOP), not followed.
    case Mode::kCreate: flags |= O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW; break;
    case Mode::kReadWrite: flags |= O_RDWR; break;
    case Mode::kRead: flags |= O_RDONLY; break;
  }
  int fd;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_open_error(path, mode, errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(detail::str("cannot open ", path, " for ", purpose(mode),
                              " (O_DIRECT): it is not a regular file; give the path of a file on a disk"));
  }
  DirectFile file;
  file.fd_ = fd;
  file.path_ = path;
  file.mode_ = mode;
  return file;
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), mode_(other.mode_) {}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    mode_ = other.mode_;
  }
  return *this;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DirectFile::reserve(int64_t nbytes) {
  ZT_CHECK(fd_ >= 0, UsageError, "DirectFile::reserve on a file that is not open");
  ZT_CHECK(nbytes >= 0, UsageError, "DirectFile::reserve(", nbytes, "): the size must not be negative");
  if (nbytes == 0) return;
  // Checked before fallocate, which on a disk too small may take all that is left before it
  // fails, leaving other jobs on the disk with nothing.
  struct stat st {};
  struct statvfs vfs {};
  if (::fstat(fd_, &st) == 0 && ::fstatvfs(fd_, &vfs) == 0) {
    const int64_t allocated = static_cast<int64_t>(st.st_blocks) * 512;
    const int64_t free_bytes = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
    if (nbytes - allocated > free_bytes) {
      throw IoError(detail::str("cannot reserve ", nbytes, " bytes for ", path_, ": ", std::strerror(ENOSPC), " (",
                                free_bytes, " bytes free on its file system: free disk space or point nvme_path at a "
                                "bigger disk)"));
    }
  }
  int rc;
  do {
    rc = ::fallocate(fd_, 0, 0, nbytes);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return;
  const int err = errno;
  // A file system without fallocate: the writes themselves will tell if the disk is full.
  if (err == EOPNOTSUPP) return;
  if (err == ENOSPC || err == EDQUOT) {
    struct statvfs vfs {};
    const int64_t free_bytes =
        ::fstatvfs(fd_, &vfs) == 0 ? static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize) : -1;
    throw IoError(detail::str("cannot reserve ", nbytes, " bytes for ", path_, ": ", std::strerror(err), " (",
                              free_bytes, " bytes free on its file system: free disk space or point nvme_path at a "
                              "bigger disk)"));
  }
  if (err == EFBIG) {
    throw IoError(detail::str("cannot reserve ", nbytes, " bytes for ", path_, ": ", std::strerror(err),
                              " (above the process's file size limit `ulimit -f` or the file system's: raise the "
                              "limit or point nvme_path at another disk)"));
  }
  throw IoError(detail::str("cannot reserve ", nbytes, " bytes for ", path_, ": ", std::strerror(err)));
}

int64_t DirectFile::size_bytes() const {
  ZT_CHECK(fd_ >= 0, UsageError, "DirectFile::size_bytes on a file that is not open");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw IoError(detail::str("cannot stat ", path_, ": ", std::strerror(errno)));
  return static_cast<int64_t>(st.st_size);
}

}  // namespace zerotrain::io
