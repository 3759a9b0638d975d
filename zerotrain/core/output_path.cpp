#include "zerotrain/core/output_path.h"

#include "zerotrain/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "zerotrain/core/error.h"

namespace zerotrain::files {
namespace {

namespace fs = std::filesystem;
using detail::str;

// A file is the same file under every name: its device and inode.
struct Input {
  dev_t device;
  ino_t inode;
  std::string path, what;
};

struct Inputs {
  std::mutex mutex;
  std::vector<Input> all;
};

Inputs& inputs() {
  static Inputs registry;
  return registry;
}

// The input `st` is, if any: "this run's config file ds.json".
std::string input_named(const struct stat& st) {
  Inputs& r = inputs();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const Input& in : r.all) {
    if (in.device == st.st_dev && in.inode == st.st_ino) return str("this run's ", in.what, " ", in.path);
  }
  return {};
}

std::string link_target(const fs::path& path) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(path, ec);
  return ec ? std::string("?") : target.string();
}

[[noreturn]] void refuse(const fs::path& path, const OutputCheck& check, const std::string& problem) {
  throw IoError(str("cannot write ", check.what, " ", path.string(), ": ", problem));
}

// What is wrong with writing the file `st` describes (from lstat or fstat), or "".
void check_stat(const fs::path& path, const struct stat& st, const OutputCheck& check) {
  if (S_ISLNK(st.st_mode)) {
    refuse(path, check, str("it is a symbolic link (to ", link_target(path),
                            "); outputs are not written through links: give the real path, or remove the link"));
  }
  if (!S_ISREG(st.st_mode)) {
    refuse(path, check, file_kind(st.st_mode) + "; give the path of a regular file (it is created if missing)");
  }
  if (const std::string input = input_named(st); !input.empty()) {
    refuse(path, check, str("it is ", input, ", which writing would destroy; choose another path"));
  }
  if (!check.may_replace && st.st_size > 0) {
    throw UsageError(str(check.what, " ", path.string(), " already exists (", static_cast<int64_t>(st.st_size),
                         " bytes) and would be replaced; ", check.replace_hint));
  }
}

std::string errno_text(int error) {
  switch (error) {
    case ENOENT: return "a folder of the path does not exist";
    case ENOTDIR: return "a component of the path is not a directory";
    case ELOOP: return "it is a symbolic link; outputs are not written through links: give the real path";
    case ENXIO: return "it is a FIFO (named pipe) or a device; give the path of a regular file";
    case EACCES:
    case EPERM: return str(std::strerror(error), " (choose a folder this user can write)");
    case EROFS: return "the file system is read-only (choose a writable folder)";
    default: return std::strerror(error);
  }
}

}  // namespace

void register_input(const fs::path& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      std::error_code type_ec;
      if (entry.is_regular_file(type_ec)) register_input(entry.path(), what);
    }
    return;
  }
  if (!S_ISREG(st.st_mode)) return;
  Inputs& r = inputs();
  std::lock_guard<std::mutex> lock(r.mutex);
  const bool known = std::any_of(r.all.begin(), r.all.end(),
                                 [&](const Input& in) { return in.device == st.st_dev && in.inode == st.st_ino; });
  if (!known) r.all.push_back({st.st_dev, st.st_ino, path.string(), std::string(what)});
}

void clear_inputs() {
  Inputs& r = inputs();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.all.clear();
}

bool check_output_file(const fs::path& path, const OutputCheck& check) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;   // a missing folder is reported when the file is opened
    refuse(path, check, errno_text(errno));
  }
  check_stat(path, st, check);
  return true;
}

int open_output_file(const fs::path& path, OpenMode mode, const OutputCheck& check) {
  // Checked before opening: a FIFO or a device is never opened at all.
  check_output_file(path, check);
  // O_NOFOLLOW and O_NONBLOCK: a link or a FIFO put there since is refused, not followed or
  // waited on.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  if (mode == OpenMode::kAppend) flags |= O_APPEND;
  if (mode == OpenMode::kCreateNew) flags |= O_EXCL;
  int fd;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int error = errno;
    refuse(path, check, error == EEXIST ? std::string("it exists already; choose another path") : errno_text(error));
  }
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) refuse(path, check, errno_text(errno));
    check_stat(path, st, check);
    // Truncated only now, after every check of the file that was opened.
    if (mode == OpenMode::kTruncate && st.st_size > 0 && ::ftruncate(fd, 0) != 0) {
      refuse(path, check, errno_text(errno));
    }
    const int status = ::fcntl(fd, F_GETFL);
    if (status < 0 || ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK) != 0) refuse(path, check, errno_text(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

void check_own_directory(const fs::path& path, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw IoError(str("cannot use ", what, " ", path.string(), ": ", errno_text(errno)));
  }
  if (S_ISLNK(st.st_mode)) {
    throw IoError(str(what, " ", path.string(), " is a symbolic link (to ", link_target(path),
                      "); zerotrain makes this folder itself and does not follow links there: remove the link, "
                      "or choose another folder"));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw IoError(str(what, " ", path.string(), " ", file_kind(st.st_mode),
                      ", not a folder; zerotrain makes a folder there: move it away, or choose another folder"));
  }
}

fs::path make_own_directories(const fs::path& root, const std::vector<std::string>& names, std::string_view what) {
  check_existing_root(root, what);
  fs::path at = root;
  std::vector<fs::path> made;
  try {
    for (const std::string& name : names) {
      at /= name;
      check_own_directory(at, what);
      if (::mkdir(at.c_str(), 0755) == 0) {
        made.push_back(at);
      } else if (errno == EEXIST) {
        check_own_directory(at, what);   // there already, or made by another rank since
      } else {
        throw IoError(str("cannot create ", what, " ", at.string(), ": ", errno_text(errno)));
      }
    }
  } catch (...) {
    // Only what this call made, and only if still empty (another rank may use it by now).
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
    throw;
  }
  return at;
}

void check_existing_root(const fs::path& root, std::string_view what) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      throw IoError(str(what, " ", root.string(),
                        " does not exist; create it or fix the path (is the disk mounted?). zerotrain does not "
                        "create it: a mistyped path would fill another disk"));
    }
    throw IoError(str(what, " ", root.string(), ": ", errno_text(error)));
  }
  ZT_CHECK(S_ISDIR(st.st_mode), IoError, what, " ", root.string(), " ", file_kind(st.st_mode),
           ", not a folder; give a folder on the disk to use");
}

}  // namespace zerotrain::files
