#include "zerotrain/comm/progress.h"

#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

std::string describe_missing(const std::vector<RankProgress>& board, int64_t seq, int self_rank) {
  std::string missing;
  for (const RankProgress& p : board) {
    if (p.rank == self_rank) continue;
    std::string entry;
    if (!p.known) {
      entry = str(p.rank, " (", p.what.empty() ? "no progress published" : p.what, ")");
    } else if (p.seq < seq) {
      entry = p.seq <= 0 ? str(p.rank, " (no collective issued yet)")
                         : str(p.rank, " (last issued #", p.seq, " ", p.what, ")");
    }
    if (entry.empty()) continue;
    missing += missing.empty() ? entry : ", " + entry;
  }
  if (missing.empty()) {
    return "every rank issued it; a peer may have failed or be overloaded";
  }
  return "ranks that did not arrive: " + missing;
}

}  // namespace zerotrain::comm::detail
