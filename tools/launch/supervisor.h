// Runs a set of child processes (the ranks of this node, or an mpirun, or ssh sessions)
// and watches them: output is prefixed and copied to per-child log files; the first child
// that fails stops all the others (SIGTERM, then SIGKILL after a grace period); a signal
// to the launcher reaches every child; nothing is left running when supervise() returns,
// not even what a child left behind (the launcher is their subreaper, reaper.h).
// Output routing (prefixes, logs, tails, mpirun's records) is rank_output.h's; this part
// starts the children, watches them end, and stops them.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerotrain::launch {

class PortReservation;

struct ChildSpec {
  std::string label;                 // "rank 3", "host worker-1", "mpirun"
  std::string log_name;              // file name inside log_dir ("rank3.log")
  std::vector<std::string> argv;     // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;   // set on top of the launcher's environment
  bool prefix_output = true;         // false when the child prefixes its own lines
  // mpirun: the number of ranks it runs, each under a wrapper that prefixes its lines with
  // "[rank N] " and reports a failure as a record (rank_report.h). The launcher then names
  // the rank that failed first, and shows mpirun's own lines only if no rank explains its end.
  int ranks_inside = 0;
  int64_t descriptors = 0;           // open files the child needs (it inherits our limit)
};

struct SupervisorOptions {
  std::vector<ChildSpec> children;
  std::optional<std::filesystem::path> log_dir;   // one <log_name> per child
  std::chrono::milliseconds kill_grace{5000};     // SIGTERM -> SIGKILL
  // The launcher got a signal (or a rank ended with 143, having saved on one): the ranks have
  // this long to finish a checkpoint before SIGKILL.
  std::chrono::milliseconds signal_grace{120000};
  int tail_lines = 20;                            // lines of the failed child's output to repeat
  bool announce_signals = true;                   // say "got SIGTERM; stopping ..." on stderr
  // A wrapper under mpirun: a failed child is reported as a record line on stderr for the
  // launcher (rank_report.h), with this rank, instead of a "failed first" report.
  int report_rank_to_launcher = -1;
  std::vector<std::filesystem::path> temporary_files;   // removed when supervise() returns
  std::vector<std::string> notices;   // lines for stderr before the children start
  // The rendezvous port this launcher picked (port_reservation.h), held until the job ends.
  std::shared_ptr<const PortReservation> master_port;
};

// Returns the exit code for the launcher: 0 when every child exited 0; otherwise the code
// of the child that failed first (128 + N for a child killed by signal N), or 128 + N when
// the launcher itself got signal N.
int supervise(const SupervisorOptions& options);

}  // namespace zerotrain::launch
