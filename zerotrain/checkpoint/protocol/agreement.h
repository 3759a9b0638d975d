// How the ranks agree during a checkpoint's save or load (save.cpp, load.cpp, and the
// engine's model save): after each phase every rank learns whether every rank succeeded, so a
// failure anywhere stops the transaction everywhere; and DeepSpeed's tag validation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/schema_misc.h"

namespace zerotrain::checkpoint {

// One rank's outcome of a phase of a save or load, and up to three numbers it reports.
struct RankStatus {
  std::string error;   // empty: it worked
  std::array<int64_t, 3> values{};
};

// Runs `fn`; its error's message, or "" when it worked (a RankStatus's error).
template <class F>
std::string capture(F&& fn) {
  try {
    fn();
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Every rank's status, on every rank (a collective). A rank that failed still calls it, so
// no rank is left waiting on another.
std::vector<RankStatus> exchange_status(comm::Communicator& comm, const RankStatus& mine);
// Throws CheckpointError on every rank when any rank failed: "<what> failed on rank 1: ...".
void throw_if_any_failed(const std::vector<RankStatus>& statuses, std::string_view what);

// DeepSpeed's checkpoint.tag_validation: every rank must name the same tag (a collective
// unless Ignore). Warn logs a mismatch; Fail throws UsageError on every rank.
void validate_tag(comm::Communicator& comm, std::string_view tag, config::TagValidation mode);

}  // namespace zerotrain::checkpoint
