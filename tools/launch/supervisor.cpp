#include "tools/launch/supervisor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>

#include "zerotrain/core/error.h"

extern char** environ;

namespace zerotrain::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Signals to the launcher arrive through this pipe so that poll() wakes up on them.
int g_signal_pipe[2] = {-1, -1};
void on_signal(int signo) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

struct Stream {
  int fd = -1;
  bool is_stderr = false;
  std::string partial;
};

struct Child {
  const ChildSpec* spec = nullptr;
  pid_t pid = -1;            // also its process group id
  bool running = false;
  int status = 0;
  Stream out, err;
  int log_fd = -1;   // O_CLOEXEC, opened before any fork so no rank inherits another's log
  std::deque<std::string> tail;
};

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void emit_line(Child& child, std::string line, bool is_stderr, int tail_lines) {
  if (!line.empty() && line.back() == '\r') line.pop_back();   // ssh -tt ends lines with \r\n
  const std::string shown = child.spec->prefix_output ? "[" + child.spec->label + "] " + line + "\n" : line + "\n";
  write_all(is_stderr ? STDERR_FILENO : STDOUT_FILENO, shown);
  if (child.log_fd >= 0) write_all(child.log_fd, line + "\n");
  child.tail.push_back(line);
  while (static_cast<int>(child.tail.size()) > tail_lines) child.tail.pop_front();
}

// Reads what is available; returns false at end of stream.
bool pump(Child& child, Stream& stream, int tail_lines) {
  char buffer[65536];
  const ssize_t n = ::read(stream.fd, buffer, sizeof(buffer));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!stream.partial.empty()) emit_line(child, stream.partial, stream.is_stderr, tail_lines);
    stream.partial.clear();
    ::close(stream.fd);
    stream.fd = -1;
    return false;
  }
  stream.partial.append(buffer, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = stream.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    emit_line(child, stream.partial.substr(start, nl - start), stream.is_stderr, tail_lines);
  }
  stream.partial.erase(0, start);
  return true;
}

std::vector<std::string> build_environment(const ChildSpec& spec) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : spec.env) merged[key] = value;
  std::vector<std::string> env;
  for (const auto& [key, value] : merged) env.push_back(key + "=" + value);
  return env;
}

void open_log(Child& child, const SupervisorOptions& options) {
  if (!options.log_dir) return;
  const auto path = *options.log_dir / child.spec->log_name;
  child.log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZT_CHECK(child.log_fd >= 0, IoError, "cannot write ", path.string(), ": ", std::strerror(errno));
}

void start(Child& child) {
  int out[2], err[2];
  ZT_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, IoError, "pipe: ", std::strerror(errno));
  std::vector<std::string> env_strings = build_environment(*child.spec);
  std::vector<char*> argv, envp;
  for (const auto& a : child.spec->argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "cannot run " + child.spec->argv[0] + ": ";   // built before fork
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  ZT_CHECK(pid >= 0, IoError, "fork: ", std::strerror(errno));
  if (pid == 0) {
    // Own process group, so that a signal to the group reaches the rank's own children too.
    ::setpgid(0, 0);
    // If the launcher dies without cleaning up (SIGKILL), the rank dies with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    // Ranks never read the terminal: in their own process group a read or a tcsetattr
    // would stop them (SIGTTIN/SIGTTOU) and the job would hang.
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* reason = std::strerror(errno);
    write_all(STDERR_FILENO, exec_failed);
    write_all(STDERR_FILENO, reason);
    write_all(STDERR_FILENO, "\n");
    ::_exit(127);
  }
  if (null_fd >= 0) ::close(null_fd);
  ::setpgid(pid, pid);   // also here, so the group exists before we might signal it
  ::close(out[1]);
  ::close(err[1]);
  child.pid = pid;
  child.running = true;
  child.out = {out[0], false, ""};
  child.err = {err[0], true, ""};
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return detail::str("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return detail::str("was killed by signal ", WTERMSIG(status), " (SIG", sigabbrev_np(WTERMSIG(status)), ")");
  }
  return "ended abnormally";
}

void signal_all(std::vector<Child>& children, int signo) {
  for (auto& c : children) {
    // The whole group, while the rank is ours: a reaped rank's pid may belong to anyone later.
    if (c.pid > 0 && c.running) ::kill(-c.pid, signo);
  }
}

class SignalGuard {
 public:
  SignalGuard() {
    ZT_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, IoError, "pipe: ", std::strerror(errno));
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int signo : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signo, &sa, &saved_[signo]);
    ::signal(SIGPIPE, SIG_IGN);
  }
  ~SignalGuard() {
    for (int signo : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signo, &saved_[signo], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
  }

 private:
  struct sigaction saved_[NSIG] {};
};

}  // namespace

namespace {
struct RemoveFiles {
  const std::vector<std::filesystem::path>& files;
  ~RemoveFiles() {
    std::error_code ignored;
    for (const auto& f : files) std::filesystem::remove(f, ignored);
  }
};
}  // namespace

int supervise(const SupervisorOptions& options) {
  RemoveFiles remove_at_exit{options.temporary_files};
  ZT_CHECK(!options.children.empty(), UsageError, "nothing to launch");
  if (options.log_dir) std::filesystem::create_directories(*options.log_dir);
  SignalGuard guard;
  std::vector<Child> children(options.children.size());
  for (size_t i = 0; i < children.size(); ++i) children[i].spec = &options.children[i];
  for (auto& c : children) open_log(c, options);
  try {
    for (auto& c : children) start(c);
  } catch (...) {
    signal_all(children, SIGKILL);
    for (auto& c : children) {
      if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
    }
    throw;
  }

  int failed = -1;           // index of the first child that failed
  int launcher_signal = 0;   // a signal the launcher received
  std::optional<Clock::time_point> kill_at;
  auto stop_all = [&](int signo) {
    signal_all(children, signo);
    if (!kill_at) kill_at = Clock::now() + options.kill_grace;
  };

  auto any_open = [&] {
    for (auto& c : children) {
      if (c.running || c.out.fd >= 0 || c.err.fd >= 0) return true;
    }
    return false;
  };
  while (any_open()) {
    std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Child*, Stream*>> owners{{nullptr, nullptr}};
    for (auto& c : children) {
      for (Stream* s : {&c.out, &c.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.emplace_back(&c, s);
        }
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), 100);
    if (ready > 0) {
      if (fds[0].revents & POLLIN) {
        unsigned char signo = 0;
        while (::read(g_signal_pipe[0], &signo, 1) == 1) {
          if (!launcher_signal) {
            launcher_signal = signo;
            if (options.announce_signals) {
              std::cerr << "zerotrain launch: got SIG" << sigabbrev_np(signo) << "; stopping " << children.size()
                        << (children.size() == 1 ? " process" : " processes") << std::endl;
            }
            stop_all(signo == SIGINT ? SIGINT : SIGTERM);
          }
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) pump(*owners[i].first, *owners[i].second, options.tail_lines);
      }
    }
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.status = status;
      // The rank is gone; anything it started in its group goes too.
      ::kill(-c.pid, SIGKILL);
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed < 0 && !launcher_signal && !kill_at) {
        failed = static_cast<int>(i);
        stop_all(SIGTERM);
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      signal_all(children, SIGKILL);
      // Streams held open by a grandchild that escaped its group must not keep us here.
      bool any_running = false;
      for (auto& c : children) any_running |= c.running;
      if (!any_running) {
        for (auto& c : children) {
          for (Stream* s : {&c.out, &c.err}) {
            if (s->fd >= 0) {
              ::close(s->fd);
              s->fd = -1;
            }
          }
        }
      }
    }
  }

  for (auto& c : children) {
    if (c.log_fd >= 0) ::close(c.log_fd);
  }
  if (launcher_signal) return 128 + launcher_signal;
  if (failed < 0) return 0;
  const Child& c = children[failed];
  std::cerr << "zerotrain launch: " << c.spec->label << " failed first: it " << describe_status(c.status);
  if (children.size() > 1) std::cerr << "; the other " << children.size() - 1 << " were stopped";
  std::cerr << ".";
  if (!c.spec->prefix_output) {
    // mpirun or a remote launcher: it has already named the failed rank above.
    std::cerr << " Its report is above.\n" << std::flush;
    return exit_code_of(c.status);
  }
  if (!c.tail.empty()) {
    std::cerr << " Its last " << c.tail.size() << " lines of output";
    if (options.log_dir) std::cerr << " (all in " << (*options.log_dir / c.spec->log_name).string() << ")";
    std::cerr << ":\n";
    for (const auto& line : c.tail) std::cerr << "  | " << line << "\n";
  } else {
    std::cerr << " It printed nothing.\n";
  }
  std::cerr << std::flush;
  return exit_code_of(c.status);
}

int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ZT_CHECK(fd >= 0, IoError, "socket: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  ZT_CHECK(ok, IoError, "cannot find a free TCP port: ", std::strerror(errno), "; pass --master_port");
  return ntohs(addr.sin_port);
}

}  // namespace zerotrain::launch
