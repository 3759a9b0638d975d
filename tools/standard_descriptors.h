// Descriptors 0, 1 and 2 are open in every zerotrain process, before anything opens one.
//
// A process started with one of them closed (`2>&-`, a daemon manager) gives that number to
// the next file it opens: the launcher's signal pipe, a rank's output pipe, a log or a
// checkpoint would become "standard error", and every message meant for the user would be
// written into it (the launcher then read the ranks' output as signals and stopped the job).
// So each entry point fills a closed one with /dev/null, in the mode the stream is used in:
// a closed standard descriptor behaves as `</dev/null` or `>/dev/null` would, and nothing the
// process opens later can land on 0-2.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace zerotrain::tools {

// The exit code when it cannot be done (IoError's, docs/errors.md): running on would be unsafe.
inline constexpr int kStandardDescriptorsExitCode = 7;

// Idempotent and cheap (three fcntl calls when all are open); async-signal-safe, and safe
// before any library is initialised (only system calls).
inline void open_standard_descriptors() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // 0..fd-1 are open, so the lowest free number, which open() takes, is fd itself.
    const int opened = ::open("/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_NOCTTY);
    if (opened == fd) continue;
    if (opened > fd) {   // only if another thread took fd first; cannot happen at start
      const int moved = ::dup2(opened, fd);
      ::close(opened);
      if (moved == fd) continue;
    }
    static const char message[] =
        "zerotrain: a standard descriptor (0, 1 or 2) is closed and /dev/null cannot be opened in its place; "
        "start zerotrain with standard input, output and error open\n";
    [[maybe_unused]] const auto n = ::write(STDERR_FILENO, message, sizeof(message) - 1);
    ::_exit(kStandardDescriptorsExitCode);
  }
}

// open_standard_descriptors() as an ELF .preinit_array entry: an executable that names it
// (ZEROTRAIN_OPEN_STANDARD_DESCRIPTORS_FIRST below) runs it before the initialisers of every
// shared library it loads: LibTorch's run before main() and may open files.
inline void open_standard_descriptors_at_start(int, char**, char**) { open_standard_descriptors(); }

}  // namespace zerotrain::tools

// In one source file of an executable (never of a shared library: the linker refuses a
// .preinit_array there).
#define ZEROTRAIN_OPEN_STANDARD_DESCRIPTORS_FIRST                                               \
  [[gnu::used, gnu::section(".preinit_array")]] static void (*const zerotrain_standard_descriptors)( \
      int, char**, char**) = &::zerotrain::tools::open_standard_descriptors_at_start
