#include "zerotrain/data/kjv.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "zerotrain/core/error.h"

extern char** environ;

namespace zerotrain::data {
namespace {

constexpr const char* kInstall = "install them with `apt-get install bible-kjv-text bible-kjv`, or run "
                                 "`bash scripts/setup.sh`";

struct Captured {
  std::string out, err;
  int status = 0;   // as waitpid reports it
};

// Runs argv[0] (looked up in PATH) with stdin from /dev/null and returns its output and exit
// status. No shell, so nothing in the arguments is interpreted. When the program cannot be
// started, `spawn_error` is the errno why (ENOENT: not installed) and the result is empty.
Captured run_capturing(const std::vector<std::string>& argv, int& spawn_error) {
  int out_pipe[2], err_pipe[2];
  ZT_CHECK(::pipe2(out_pipe, O_CLOEXEC) == 0 && ::pipe2(err_pipe, O_CLOEXEC) == 0, IoError,
           "cannot create a pipe to run ", argv[0], ": ", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  spawn_error = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Captured result;
  if (spawn_error != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result;
  }
  // Both pipes at once: a child that fills one while we block on the other would hang.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buffer[1 << 16];
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace

std::string kjv_text(const KjvOptions& options) {
  const std::filesystem::path data = std::filesystem::path(options.data_dir) / "bible.data";
  std::error_code ec;
  ZT_CHECK(std::filesystem::is_regular_file(data, ec), IoError, "the King James Bible's text (", data.string(),
           ", Debian package bible-kjv-text) is missing; ", kInstall);
  int spawn_error = 0;
  const Captured run =
      run_capturing({options.program, "-l79", "-p", options.data_dir, "Gen1:1-Rev22:21"}, spawn_error);
  ZT_CHECK(spawn_error == 0, IoError, "cannot run `", options.program, "`, the program that prints the King James ",
           "Bible (Debian package bible-kjv): ", std::strerror(spawn_error), "; ", kInstall);
  std::string err = run.err.substr(0, 500);
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const bool exited_ok = WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
  ZT_CHECK(exited_ok, IoError, "`", options.program, " Gen1:1-Rev22:21` failed (",
           WIFEXITED(run.status) ? "exit status " + std::to_string(WEXITSTATUS(run.status))
                                 : "killed by signal " + std::to_string(WTERMSIG(run.status)),
           err.empty() ? "" : ": " + err, "); reinstall the packages bible-kjv-text and bible-kjv: ", kInstall);
  // The whole Bible is 4.3 MB; much less means the program printed something else.
  ZT_CHECK(run.out.size() > size_t{4'000'000}, IoError, "`", options.program, " Gen1:1-Rev22:21` printed only ",
           run.out.size(), " bytes, not the whole King James Bible (4.3 MB); reinstall bible-kjv-text and bible-kjv: ",
           kInstall);
  return run.out;
}

std::shared_ptr<const TextDataset> load_kjv(Split split, int64_t block_size, const KjvOptions& options) {
  return make_text_dataset(kjv_text(options), split, block_size, "the King James Bible text", "King James Bible");
}

}  // namespace zerotrain::data
