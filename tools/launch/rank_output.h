// The launcher's output routing: each child's standard output and error, read line by line,
// shown on the console with a "[rank N] " prefix, copied to the child's log file, and kept
// as a tail for a failure report; under mpirun, the wrappers' records and mpirun's own lines
// sorted out of the stream (rank_report.h). Starting and stopping the children is
// supervisor.cpp's.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tools/launch/rank_report.h"
#include "tools/launch/supervisor.h"

namespace zerotrain::launch::output {

struct Stream {
  int fd = -1;
  bool is_stderr = false;
  std::string partial;
};

// Lines of mpirun itself (not of a rank) are held back: shown at the end unless a rank's
// failure explains mpirun's end, when they are only its banners about that failure.
struct HeldLine {
  std::string text;
  bool is_stderr = false;
};
constexpr size_t kMaxHeldLines = 200;

// What the launcher keeps of one child's output.
struct ChildOutput {
  const ChildSpec* spec = nullptr;
  Stream out, err;
  int log_fd = -1;   // O_CLOEXEC, opened before any fork so no rank inherits another's log
  std::string log_path;
  int log_errno = 0;   // the first failed write to the log: reported, and the log given up
  std::deque<std::string> tail;
  // With ranks_inside: how its ranks ended, each rank's last lines, and mpirun's own lines.
  std::vector<RankEnd> rank_ends;
  std::map<int, std::deque<std::string>> rank_tails;
  std::deque<HeldLine> held;
  bool all_ranks_ended() const {
    return spec->ranks_inside > 0 && static_cast<int>(rank_ends.size()) >= spec->ranks_inside;
  }
  const RankEnd* first_failure() const;
};

// Returns 0, or the errno of the write that failed. A descriptor another process made
// non-blocking (a shared pipe) is waited for, as a blocking one would be.
int write_all(int fd, std::string_view text);

// The console (the launcher's standard output and error) for a new job; `logs`: --log_dir
// keeps every line. console_lost(): some line could not be shown there.
void reset_console(bool logs);
bool console_lost();

// Opens <log_dir>/<log_name> for the child when there is a log_dir; throws IoError.
void open_log(ChildOutput& child, const SupervisorOptions& options);
// Reads what is available on `stream` and routes its complete lines; false at end of stream.
bool pump(ChildOutput& child, Stream& stream, int tail_lines);
// Shows mpirun's own lines, held back until now.
void show_held_lines(ChildOutput& child);

}  // namespace zerotrain::launch::output
