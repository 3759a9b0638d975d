// How the per-rank wrappers under mpirun tell the launcher how their rank ended, and when.
//
// Every wrapper whose rank fails could only say "my rank failed": it cannot know whether
// another rank failed before. So it prints no report itself; it writes one record line to
// its stderr, which mpirun forwards to the launcher, and the launcher reports the failed
// rank with the earliest record, once. Records cross hosts with the output, so their times
// are wall-clock times. A rank that ends well is recorded too: once every rank has ended,
// the launcher does not wait for an mpirun that does not exit (OpenMPI 4.1.4's mpirun hangs
// when 100 or more processes exit as soon as they start). The wrapper prefixes every line of its rank with
// "[rank N] ", which lets the launcher keep each rank's last lines for its report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zerotrain::launch {

struct RankEnd {
  int rank = -1;
  int status = 0;          // as waitpid() returned it
  bool failed = false;     // it failed on its own (not stopped because another rank failed)
  int64_t time_ns = 0;     // CLOCK_REALTIME when the wrapper saw the rank end
};

// One line, '\n' included. It starts with an ASCII record separator, so no text a program
// prints by accident is taken for a record.
std::string format_rank_end(const RankEnd& end);
std::optional<RankEnd> parse_rank_end(std::string_view line);

// The rank of a line a wrapper prefixed ("[rank 12] text" -> 12, and `text` in *rest).
std::optional<int> parse_rank_prefix(std::string_view line, std::string_view* rest);

}  // namespace zerotrain::launch
