// The part of gradient reduction every stage shares: buckets launch in one fixed
// (group, bucket) order on every rank once all their parameters' gradients are in, so ranks
// whose backward visits parameters in another order still issue the same collectives in the
// same order; at most `max_in_flight` reductions stay in flight (DeepSpeed's double ipg
// buffers with overlap_comm, none without). What a reduction is belongs to the stage.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "zerotrain/comm/work.h"
#include "zerotrain/stages/staging.h"

namespace zerotrain::stages {

// A reduction in flight. When it is done, `result` is added into `write_back` (gradients
// accumulated over micro-steps) or copied there (a reduction in another dtype).
struct PendingReduce {
  comm::Work work;
  at::Tensor result;
  at::Tensor write_back;
  bool accumulate = false;
  at::Tensor keep_alive;   // a buffer the backend reads, tracked by the StagingMeter
  std::function<void()> done;   // once the reduction is over (or abandoned): the stage takes its buffers back
};

class BucketReducer {
 public:
  using Launch = std::function<PendingReduce(std::size_t group, std::size_t bucket)>;

  // `params_per_bucket[g][b]`: how many parameters bucket b of group g waits for.
  BucketReducer(std::vector<std::vector<int>> params_per_bucket, std::size_t max_in_flight, Launch launch,
                StagingMeter* meter);

  // A backward starts; `reducing` false: gradients only accumulate (no_sync, or stages 0-1
  // before the accumulation boundary).
  void begin_backward(bool reducing);
  bool reducing() const { return reducing_; }
  // One parameter of bucket (group, bucket) has its gradient (or none: unused).
  void arrive(std::size_t group, std::size_t bucket);
  // Every bucket has launched (when reducing); an internal error otherwise.
  void check_all_launched() const;
  bool idle() const { return in_flight_.empty(); }
  // Finishes every reduction. On an error, the others are still waited for (comm::wait_all)
  // before it is rethrown, so none is left writing into buffers the caller may free.
  void wait_all();

 private:
  void launch_ready();
  void finish_oldest(std::size_t count);
  void abandon() noexcept;
  // A finished reduction's buffers go back: the meter's count, the stage's pool.
  void settle(PendingReduce& r) noexcept;

  std::vector<std::vector<int>> params_per_bucket_;
  std::vector<std::vector<int>> pending_;   // per bucket: parameters still to arrive
  std::vector<std::pair<std::size_t, std::size_t>> order_;
  std::size_t next_ = 0;
  bool reducing_ = false;
  std::size_t max_in_flight_;
  Launch launch_;
  StagingMeter* meter_;
  std::deque<PendingReduce> in_flight_;   // oldest first
};

}  // namespace zerotrain::stages
