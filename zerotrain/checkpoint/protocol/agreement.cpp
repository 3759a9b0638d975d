#include "zerotrain/checkpoint/protocol/agreement.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::checkpoint {
namespace {

constexpr int64_t kMessageWords = 64;                  // 512 bytes of message per rank
constexpr int64_t kWords = 1 + 3 + 1 + kMessageWords;  // failed, values, length, message

}  // namespace

std::vector<RankStatus> exchange_status(comm::Communicator& comm, const RankStatus& mine) {
  const int world = comm.world_size();
  at::Tensor local = at::zeros({kWords}, at::kLong);
  int64_t* w = local.data_ptr<int64_t>();
  const std::string message = mine.error.substr(0, kMessageWords * 8);
  w[0] = mine.error.empty() ? 0 : 1;
  for (int i = 0; i < 3; ++i) w[1 + i] = mine.values[i];
  w[4] = static_cast<int64_t>(message.size());
  std::memcpy(w + 5, message.data(), message.size());
  at::Tensor all = at::empty({kWords * world}, at::kLong);
  comm.all_gather(local, all).wait();
  std::vector<RankStatus> out(world);
  const int64_t* a = all.data_ptr<int64_t>();
  for (int r = 0; r < world; ++r) {
    const int64_t* x = a + r * kWords;
    for (int i = 0; i < 3; ++i) out[r].values[i] = x[1 + i];
    if (x[0] != 0) {
      const int64_t n = std::clamp<int64_t>(x[4], 0, kMessageWords * 8);
      out[r].error.assign(reinterpret_cast<const char*>(x + 5), static_cast<size_t>(n));
      if (out[r].error.empty()) out[r].error = "failed (no message)";
    }
  }
  return out;
}

void throw_if_any_failed(const std::vector<RankStatus>& statuses, std::string_view what) {
  std::string message;
  int failed = 0;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (statuses[r].error.empty()) continue;
    // Ranks usually fail alike (the same full disk): say each distinct message once.
    bool repeated = false;
    for (size_t q = 0; q < r; ++q) repeated = repeated || statuses[q].error == statuses[r].error;
    ++failed;
    if (!repeated) message += "\n  rank " + std::to_string(r) + ": " + statuses[r].error;
  }
  if (failed == 0) return;
  throw CheckpointError(std::string(what) + " failed on " + std::to_string(failed) + " of " +
                        std::to_string(statuses.size()) + " rank(s):" + message);
}

void validate_tag(comm::Communicator& comm, std::string_view tag, config::TagValidation mode) {
  if (mode == config::TagValidation::kIgnore || comm.world_size() == 1) return;
  const auto h = static_cast<int64_t>(checksum_of(tag.data(), static_cast<int64_t>(tag.size())) >> 1);
  // The max of h and of -h: equal tags give hi == -lo (there is no min reduction).
  at::Tensor both = at::tensor({h, -h}, at::kLong);
  comm.all_reduce(both, comm::ReduceOp::kMax).wait();
  if (both[0].item<int64_t>() == -both[1].item<int64_t>()) return;
  const std::string message = "checkpoint tag \"" + std::string(tag) + "\" is not the same on every rank " +
                              "(checkpoint.tag_validation); pass the same tag on all ranks";
  ZT_CHECK(mode != config::TagValidation::kFail, UsageError, message);
  ZT_LOG_WARN(message);
}

}  // namespace zerotrain::checkpoint
