#include "tools/launch/supervisor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <unordered_map>

#include "tools/launch/rank_output.h"
#include "tools/launch/rank_report.h"
#include "tools/launch/reaper.h"
#include "tools/standard_descriptors.h"
#include "zerotrain/core/error.h"

extern char** environ;

namespace zerotrain::launch {
namespace {

using namespace output;
using Clock = std::chrono::steady_clock;

// Signals to the launcher arrive through this pipe so that poll() wakes up on them. Only
// on_signal() writes to it, one byte per signal, its number: the pipe is close-on-exec, above
// descriptor 2 (open_standard_descriptors()), and a rank runs none of our handlers (start()).
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
int g_signal_pipe[2] = {-1, -1};
void on_signal(int signo) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved_errno;
}

// After every rank has ended, the time mpirun gets to exit before it is stopped.
constexpr std::chrono::seconds kMpirunExitWait{10};
// After every child has ended, how long their output is still read: a process a child left
// behind in another process group (a daemon) may hold it open, and must not keep the
// launcher waiting (it is stopped when supervise() returns).
constexpr std::chrono::seconds kDrainAfterExit{2};

// A child: its process, and what the output routing keeps of it (rank_output.h).
struct Child : output::ChildOutput {
  pid_t pid = -1;            // also its process group id
  bool running = false;
  int status = 0;
  int64_t ended_ns = 0;      // CLOCK_REALTIME when it was reaped
  // mpirun: when it is stopped if it does not exit once every rank has ended.
  std::optional<std::chrono::steady_clock::time_point> stop_at;
};

int64_t wall_clock_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

std::vector<std::string> build_environment(const ChildSpec& spec) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : spec.env) merged[key] = value;
  // Every line of this child gets "[rank N] " here: its logger need not say the rank again.
  if (spec.prefix_output) merged["ZEROTRAIN_LAUNCH_PREFIXES_RANK"] = "1";
  std::vector<std::string> env;
  for (const auto& [key, value] : merged) env.push_back(key + "=" + value);
  return env;
}


void start(Child& child) {
  // Ranks never read the terminal: in their own process group a read or a tcsetattr
  // would stop them (SIGTTIN/SIGTTOU) and the job would hang.
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ZT_CHECK(null_fd >= 0, IoError, "cannot open /dev/null for the standard input of ", child.spec->label, ": ",
           std::strerror(errno));
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int pipe_errno = errno;
    for (int fd : {out[0], out[1], null_fd}) ::close(fd);
    throw IoError(detail::str("pipe: ", std::strerror(pipe_errno)));
  }
  // The dup2()s below rely on it: none of these is one of the numbers they give the rank.
  for (int fd : {null_fd, out[0], out[1], err[0], err[1]}) {
    ZT_INTERNAL_ASSERT(fd > STDERR_FILENO, "descriptor ", fd, " of a rank's standard streams is below 3");
  }
  std::vector<std::string> env_strings = build_environment(*child.spec);
  std::vector<char*> argv, envp;
  for (const auto& a : child.spec->argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Built before fork: the child allocates nothing.
  const std::string exec_failed = "cannot run " + child.spec->argv[0] + ": ";
  const std::string setup_failed = exec_failed + "its standard streams could not be set up\n";
  const pid_t parent = ::getpid();
  // Signals stay blocked in the child until it has dropped the launcher's handlers: a
  // SIGTERM meant for the rank (the job stopping while it starts) must not run on_signal,
  // which would write to the launcher's signal pipe and read there as the launcher's own.
  sigset_t all, previous;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    const int fork_errno = errno;
    for (int fd : {out[0], out[1], err[0], err[1], null_fd}) ::close(fd);
    throw IoError(detail::str("fork: ", std::strerror(fork_errno)));
  }
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    // Own session, and with it its own process group, so that a signal to the group reaches
    // the rank's own children too. A session rather than only a group because Linux's
    // scheduler autogroups by session: ranks sharing the launcher's session would share one
    // process's weight, so a single busy process elsewhere took half the CPU from the whole
    // job (torchrun also starts each rank in its own session).
    ::setsid();
    // If the launcher dies without cleaning up (SIGKILL), the rank dies with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 ||
        ::dup2(err[1], STDERR_FILENO) < 0) {
      write_all(err[1], setup_failed);
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* reason = std::strerror(errno);
    write_all(STDERR_FILENO, exec_failed);
    write_all(STDERR_FILENO, reason);
    write_all(STDERR_FILENO, "\n");
    ::_exit(127);
  }
  ::close(null_fd);
  ::close(out[1]);
  ::close(err[1]);
  child.pid = pid;
  child.running = true;
  child.out = {out[0], false, ""};
  child.err = {err[0], true, ""};
}

// zerotrain train's exit after saving a checkpoint on SIGTERM or SIGUSR1 (128 + SIGTERM).
bool saved_on_signal(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 143; }

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

// A running rank's process group (its session). The rank makes that group itself, after
// fork; until it has, the group does not exist and the signal goes to the rank alone (held
// blocked until the rank's handlers are the defaults, so it still acts on it). Only for
// ranks not yet reaped: a reaped rank's pid may belong to anyone later.
void signal_running_rank(const Child& c, int signo) {
  if (::kill(-c.pid, signo) != 0 && errno == ESRCH) ::kill(c.pid, signo);
}

void signal_all(std::vector<Child>& children, int signo) {
  for (auto& c : children) {
    if (c.pid > 0 && c.running) signal_running_rank(c, signo);
  }
}

class SignalGuard {
 public:
  SignalGuard() {
    ZT_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, IoError, "pipe: ", std::strerror(errno));
    const bool above_standard = g_signal_pipe[0] > STDERR_FILENO && g_signal_pipe[1] > STDERR_FILENO;
    if (!above_standard) {
      ::close(g_signal_pipe[0]);
      ::close(g_signal_pipe[1]);
    }
    ZT_INTERNAL_ASSERT(above_standard, "the launcher's signal pipe took a standard descriptor");
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int signo : kHandledSignals) ::sigaction(signo, &sa, &saved_[signo]);
    ::signal(SIGPIPE, SIG_IGN);
  }
  ~SignalGuard() {
    for (int signo : kHandledSignals) ::sigaction(signo, &saved_[signo], nullptr);
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

// However supervise() ends (a return, a failed fork), nothing below the launcher survives it.
struct ReapChildren {
  ~ReapChildren() { kill_and_reap_descendants(); }
};

void reserve_descriptors_for(const SupervisorOptions& options) {
  int64_t child_needs = 0, processes = 0;
  for (const auto& spec : options.children) {
    child_needs = std::max(child_needs, spec.descriptors);
    processes += std::max(1, spec.ranks_inside);
  }
  reserve_descriptors(static_cast<int64_t>(options.children.size()), options.log_dir.has_value(), child_needs,
                      processes);
}

void print_failure(const std::string& label, int status, size_t others, const std::deque<std::string>& tail,
                   const std::optional<std::filesystem::path>& log) {
  std::cerr << "zerotrain launch: " << label << " failed first: it " << describe_status(status);
  if (others > 0) std::cerr << "; the other " << others << " were stopped";
  std::cerr << ".";
  if (!tail.empty()) {
    std::cerr << " Its last " << tail.size() << " lines of output";
    if (log) std::cerr << " (all in " << log->string() << ")";
    std::cerr << ":\n";
    for (const auto& line : tail) std::cerr << "  | " << line << "\n";
  } else {
    std::cerr << " It printed nothing.\n";
  }
  std::cerr << std::flush;
}

// mpirun ended because of a rank: the wrappers' records name the one that failed first.
int report_first_rank(const Child& mpirun, const SupervisorOptions& options) {
  const RankEnd* first = mpirun.first_failure();
  const auto tail = mpirun.rank_tails.find(first->rank);
  std::optional<std::filesystem::path> log;
  if (options.log_dir) log = *options.log_dir / detail::str("rank", first->rank, ".log");
  print_failure(detail::str("rank ", first->rank), first->status,
                static_cast<size_t>(std::max(0, mpirun.spec->ranks_inside - 1)),
                tail == mpirun.rank_tails.end() ? std::deque<std::string>{} : tail->second, log);
  return exit_code_of(first->status);
}

}  // namespace

int supervise(const SupervisorOptions& options) {
  // The entry points did this before anything else ran; a caller that is not one of them
  // (a test) gets the same guarantee.
  tools::open_standard_descriptors();
  reset_console(options.log_dir.has_value());
  RemoveFiles remove_at_exit{options.temporary_files};
  ZT_CHECK(!options.children.empty(), UsageError, "nothing to launch");
  reserve_descriptors_for(options);
  if (options.log_dir) std::filesystem::create_directories(*options.log_dir);
  become_subreaper();
  ReapChildren reap_at_exit;
  SignalGuard guard;
  std::vector<Child> children(options.children.size());
  for (size_t i = 0; i < children.size(); ++i) children[i].spec = &options.children[i];
  for (auto& c : children) open_log(c, options);
  for (const auto& line : options.notices) std::cerr << line << '\n';
  std::unordered_map<pid_t, size_t> index_of;
  for (size_t i = 0; i < children.size(); ++i) {
    start(children[i]);   // if one cannot start, reap_at_exit stops those that did
    index_of[children[i].pid] = i;
  }

  int failed = -1;           // index of the first child that failed
  int launcher_signal = 0;   // a signal the launcher received
  std::optional<Clock::time_point> kill_at;
  std::optional<Clock::time_point> drain_until;
  auto stop_all = [&](int signo, std::chrono::milliseconds grace) {
    signal_all(children, signo);
    if (!kill_at) kill_at = Clock::now() + grace;
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
          ZT_INTERNAL_ASSERT(std::find(std::begin(kHandledSignals), std::end(kHandledSignals), signo) !=
                                 std::end(kHandledSignals),
                             "the launcher's signal pipe carried byte ", static_cast<int>(signo),
                             ", which is not a signal it handles");
          if (!launcher_signal) {
            launcher_signal = signo;
            if (options.announce_signals) {
              size_t processes = 0;   // mpirun counts as its ranks
              for (const auto& c : children) processes += std::max(1, c.spec->ranks_inside);
              std::cerr << "zerotrain launch: got SIG" << sigabbrev_np(signo) << "; stopping " << processes
                        << (processes == 1 ? " process" : " processes") << std::endl;
            }
            // SIGINT and SIGUSR1 reach the ranks as they are (zerotrain train saves on SIGUSR1
            // and SIGTERM); SIGHUP as SIGTERM.
            stop_all(signo == SIGINT || signo == SIGUSR1 ? signo : SIGTERM, options.signal_grace);
          }
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) pump(*owners[i].first, *owners[i].second, options.tail_lines);
      }
    }
    // A rank's failure under mpirun arrives as a record, while mpirun lives: the job stops as
    // a local one does. mpirun stops its ranks, but not those it was still starting, and
    // after the grace it goes (its wrappers hear it and stop their ranks).
    for (size_t i = 0; i < children.size(); ++i) {
      if (failed < 0 && !launcher_signal && !kill_at && children[i].first_failure() != nullptr) {
        failed = static_cast<int>(i);
        stop_all(SIGTERM, options.kill_grace);
      }
    }
    // Our children, and the orphans reparented to us (reaped and forgotten).
    for (int status = 0;;) {
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      const auto found = index_of.find(pid);
      if (found == index_of.end() || !children[found->second].running) continue;
      Child& c = children[found->second];
      c.running = false;
      c.status = status;
      c.ended_ns = wall_clock_ns();
      // The rank is gone; anything it started in its group goes too.
      ::kill(-c.pid, SIGKILL);
      // mpirun: when every rank has reported its end, those records say how the job went.
      const bool ok = c.all_ranks_ended() ? c.first_failure() == nullptr
                                          : WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed < 0 && !launcher_signal && !kill_at) {
        failed = static_cast<int>(found->second);
        if (saved_on_signal(status)) {
          // The others stop after the same step and are saving the same checkpoint: a
          // SIGTERM now could end one before its save is done. They get the grace instead.
          kill_at = Clock::now() + options.signal_grace;
        } else {
          stop_all(SIGTERM, options.kill_grace);
        }
      }
    }
    for (auto& c : children) {
      // Every rank has ended but mpirun has not (OpenMPI 4.1 can hang there): it goes.
      if (!c.running || !c.all_ranks_ended()) continue;
      if (!c.stop_at) c.stop_at = Clock::now() + kMpirunExitWait;
      if (Clock::now() < *c.stop_at) continue;
      std::cerr << "zerotrain launch: every rank has ended, but " << c.spec->label << " did not exit within "
                << kMpirunExitWait.count() << " s; stopping it" << std::endl;
      signal_running_rank(c, SIGKILL);
      c.stop_at = Clock::time_point::max();   // said once
    }
    if (kill_at && Clock::now() >= *kill_at) signal_all(children, SIGKILL);
    bool any_running = false;
    for (auto& c : children) any_running |= c.running;
    if (!any_running && !drain_until) drain_until = Clock::now() + kDrainAfterExit;
    if (!any_running && ((kill_at && Clock::now() >= *kill_at) || Clock::now() >= *drain_until)) {
      // Streams held open by a grandchild that escaped its group must not keep us here.
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

  bool logs_lost = false;
  for (auto& c : children) {
    if (c.log_fd >= 0 && ::close(c.log_fd) != 0 && c.log_errno == 0) c.log_errno = errno;
    logs_lost |= c.log_errno != 0;
  }
  if (options.report_rank_to_launcher >= 0) {
    // A wrapper under mpirun: the launcher decides which rank failed first.
    ZT_INTERNAL_ASSERT(children.size() == 1, "a wrapper runs one rank");
    const Child& rank = children.front();
    write_all(STDERR_FILENO,
              format_rank_end({options.report_rank_to_launcher, rank.status, failed >= 0, rank.ended_ns}));
    if (launcher_signal) return 128 + launcher_signal;
    return failed >= 0 ? exit_code_of(rank.status) : 0;
  } else if (failed >= 0 && !launcher_signal && children[failed].first_failure() != nullptr) {
    return report_first_rank(children[failed], options);
  }
  for (auto& c : children) show_held_lines(c);
  if (launcher_signal) return 128 + launcher_signal;
  if (failed < 0 && logs_lost) {
    // Every rank succeeded, but not all their output reached --log_dir: not a clean success.
    write_all(STDERR_FILENO, "zerotrain launch: the job succeeded, but its logs are incomplete (see above)\n");
    return IoError("").exit_code();
  }
  if (failed < 0 && console_lost()) {
    // The same for the console: the user did not see all of it.
    write_all(STDERR_FILENO, "zerotrain launch: the job succeeded, but its output could not all be shown (see above)\n");
    return IoError("").exit_code();
  }
  if (failed < 0) return 0;
  const Child& c = children[failed];
  if (saved_on_signal(c.status)) {
    std::cerr << "zerotrain launch: " << c.spec->label << " stopped on a signal after saving a checkpoint (exit 143); "
              << "its output above names the checkpoint\n" << std::flush;
    return exit_code_of(c.status);
  }
  if (!c.spec->prefix_output) {
    // mpirun without a rank's record, or a remote launcher: the report is its own, above.
    std::cerr << "zerotrain launch: " << c.spec->label << " failed first: it " << describe_status(c.status);
    if (children.size() > 1) std::cerr << "; the other " << children.size() - 1 << " were stopped";
    std::cerr << ". Its report is above.\n" << std::flush;
    return exit_code_of(c.status);
  }
  std::optional<std::filesystem::path> log;
  if (options.log_dir) log = *options.log_dir / c.spec->log_name;
  print_failure(c.spec->label, c.status, children.size() - 1, c.tail, log);
  return exit_code_of(c.status);
}

}  // namespace zerotrain::launch
