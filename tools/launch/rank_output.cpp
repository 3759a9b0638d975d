#include "tools/launch/rank_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"

namespace zerotrain::launch::output {

const RankEnd* ChildOutput::first_failure() const {
  const RankEnd* first = nullptr;
  for (const auto& end : rank_ends) {
    if (end.failed && (first == nullptr || end.time_ns < first->time_ns)) first = &end;
  }
  return first;
}

int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd writable{fd, POLLOUT, 0};
      ::poll(&writable, 1, -1);
      continue;
    }
    if (n <= 0) return n < 0 ? errno : EIO;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

namespace {

// The console: the launcher's standard output and error, where the ranks' lines are shown.
// One that cannot be written (a full disk, a reader that went away) is given up at its first
// failure, which is said on stderr; the job goes on (its ranks are not stopped for it), and
// if it succeeds, the launcher exits with IoError's code: its output was not all shown.
struct Console {
  int lost_errno[3] = {0, 0, 0};   // by descriptor: [1] stdout, [2] stderr
  bool logs = false;               // --log_dir keeps every line
  bool lost() const { return lost_errno[STDOUT_FILENO] != 0 || lost_errno[STDERR_FILENO] != 0; }
};
Console g_console;

void show(bool is_stderr, std::string_view text) {
  const int fd = is_stderr ? STDERR_FILENO : STDOUT_FILENO;
  if (g_console.lost_errno[fd] != 0) return;
  const int error = write_all(fd, text);
  if (error == 0) return;
  g_console.lost_errno[fd] = error;
  if (fd == STDOUT_FILENO) {
    write_all(STDERR_FILENO, detail::str("zerotrain launch: cannot write the standard output: ", std::strerror(error),
                                         "; the ranks' output to it is not shown from here on",
                                         g_console.logs ? " (--log_dir has all of it)\n" : "\n"));
  }
}

// A log line, checked: a log that cannot be written (a full disk) is said at once on stderr
// with its path and the reason, given up, and makes the launcher's exit code IoError's.
void write_log(ChildOutput& child, const std::string& line) {
  if (child.log_fd < 0) return;
  std::string_view text = line;
  while (!text.empty()) {
    const ssize_t n = ::write(child.log_fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      child.log_errno = n < 0 ? errno : ENOSPC;
      write_all(STDERR_FILENO, detail::str("zerotrain launch: cannot write the log ", child.log_path, ": ",
                                           std::strerror(child.log_errno), "; ", child.spec->label,
                                           "'s output goes to the console only from here on\n"));
      ::close(child.log_fd);
      child.log_fd = -1;
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void keep_tail(std::deque<std::string>& tail, std::string_view line, int tail_lines) {
  tail.emplace_back(line);
  while (static_cast<int>(tail.size()) > tail_lines) tail.pop_front();
}

// A line from mpirun: a record of a wrapper, a rank's line, or mpirun's own.
void route_mpirun_line(ChildOutput& child, const std::string& line, bool is_stderr, int tail_lines) {
  if (auto end = parse_rank_end(line)) {
    child.rank_ends.push_back(*end);
    return;
  }
  write_log(child, line + "\n");
  std::string_view text;
  if (auto rank = parse_rank_prefix(line, &text)) {
    show(is_stderr, line + "\n");
    keep_tail(child.rank_tails[*rank], text, tail_lines);
    return;
  }
  child.held.push_back({line, is_stderr});
  if (child.held.size() > kMaxHeldLines) child.held.pop_front();
}

void emit_line(ChildOutput& child, std::string line, bool is_stderr, int tail_lines) {
  if (!line.empty() && line.back() == '\r') line.pop_back();   // ssh -tt ends lines with \r\n
  if (child.spec->ranks_inside > 0) return route_mpirun_line(child, line, is_stderr, tail_lines);
  const std::string shown = child.spec->prefix_output ? "[" + child.spec->label + "] " + line + "\n" : line + "\n";
  show(is_stderr, shown);
  write_log(child, line + "\n");
  keep_tail(child.tail, line, tail_lines);
}

}  // namespace

void show_held_lines(ChildOutput& child) {
  for (const auto& held : child.held) show(held.is_stderr, held.text + "\n");
  child.held.clear();
}

// Reads what is available; returns false at end of stream.
bool pump(ChildOutput& child, Stream& stream, int tail_lines) {
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

void reset_console(bool logs) {
  g_console = {};
  g_console.logs = logs;
}

bool console_lost() { return g_console.lost(); }

void open_log(ChildOutput& child, const SupervisorOptions& options) {
  if (!options.log_dir) return;
  const auto path = *options.log_dir / child.spec->log_name;
  child.log_path = path.string();
  child.log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZT_CHECK(child.log_fd >= 0, IoError, "cannot write ", path.string(), ": ", std::strerror(errno));
}

}  // namespace zerotrain::launch::output
