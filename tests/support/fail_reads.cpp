// Test shim, loaded with LD_PRELOAD: read(2) and pread(2) of one file fail with EIO, as on a
// disk with a bad sector, so the tests can see what every reader makes of a real failed read.
//
//   LD_PRELOAD=libfail_reads.so ZEROTRAIN_TEST_EIO_PATH=/abs/path [ZEROTRAIN_TEST_EIO_FROM=BYTES] cmd
//
// Reads of that file (matched by the descriptor's /proc/self/fd link) that would return bytes
// at or past ZEROTRAIN_TEST_EIO_FROM (default 0) fail; the bytes before it read normally, so
// a header can be read and the data after it cannot. Every other read passes through.
#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using ReadFn = ssize_t (*)(int, void*, size_t);
using PreadFn = ssize_t (*)(int, void*, size_t, off_t);

bool is_target(int fd) {
  const char* target = getenv("ZEROTRAIN_TEST_EIO_PATH");
  if (target == nullptr || *target == '\0') return false;
  char link[64];
  char path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 0) return false;
  path[n] = '\0';
  return strcmp(path, target) == 0;
}

off_t fail_from() {
  const char* from = getenv("ZEROTRAIN_TEST_EIO_FROM");
  return from == nullptr ? 0 : static_cast<off_t>(std::strtoll(from, nullptr, 10));
}

// How many bytes from `offset` may be read before the failing range; -1 when none.
ssize_t allowed(off_t offset, size_t count) {
  const off_t from = fail_from();
  if (offset >= from) return -1;
  const auto before = static_cast<size_t>(from - offset);
  return static_cast<ssize_t>(before < count ? before : count);
}

ssize_t failing_pread(const char* name, int fd, void* buf, size_t count, off_t offset) {
  const auto real = reinterpret_cast<PreadFn>(dlsym(RTLD_NEXT, name));
  if (count > 0 && is_target(fd)) {
    const ssize_t ok = allowed(offset, count);
    if (ok < 0) {
      errno = EIO;
      return -1;
    }
    count = static_cast<size_t>(ok);
  }
  return real(fd, buf, count, offset);
}

}  // namespace

extern "C" ssize_t read(int fd, void* buf, size_t count) {
  static const auto real_read = reinterpret_cast<ReadFn>(dlsym(RTLD_NEXT, "read"));
  if (count > 0 && is_target(fd)) {
    const ssize_t ok = allowed(lseek(fd, 0, SEEK_CUR), count);
    if (ok < 0) {
      errno = EIO;
      return -1;
    }
    count = static_cast<size_t>(ok);
  }
  return real_read(fd, buf, count);
}

extern "C" ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  return failing_pread("pread", fd, buf, count, offset);
}
extern "C" ssize_t pread64(int fd, void* buf, size_t count, off_t offset) {
  return failing_pread("pread64", fd, buf, count, offset);
}
