// The progress board: every rank publishes the last collective it issued, so that a rank
// whose wait times out can name the ranks that never arrived (and what each was doing
// last) instead of just saying "timeout". Internal to comm/.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

using ::zerotrain::detail::str;

struct RankProgress {
  int rank = 0;
  bool known = false;     // false: the rank published nothing we could read
  int64_t seq = -1;       // the last collective it issued (0: none yet)
  std::string what;       // "all_reduce(float, 1024 elements, sum)" or why it is unknown
};

class ProgressBoard {
 public:
  virtual ~ProgressBoard() = default;
  // Called by the issuing thread for every collective; must be cheap (no IO).
  virtual void publish(int64_t seq, const std::string& what) = 0;
  // What every rank published last, read with a short timeout.
  virtual std::vector<RankProgress> snapshot() = 0;
};

// "ranks that did not arrive: 1 (last issued #16 barrier), 3 (nothing issued yet)"
// for the ranks whose last issued sequence number is below `seq`.
std::string describe_missing(const std::vector<RankProgress>& board, int64_t seq, int self_rank);

}  // namespace zerotrain::comm::detail
