#include "zerotrain/stages/bucket_reducer.h"

#include <ATen/ATen.h>

#include "zerotrain/core/error.h"

namespace zerotrain::stages {

BucketReducer::BucketReducer(std::vector<std::vector<int>> params_per_bucket, std::size_t max_in_flight, Launch launch,
                             StagingMeter* meter)
    : params_per_bucket_(std::move(params_per_bucket)),
      pending_(params_per_bucket_),
      max_in_flight_(max_in_flight),
      launch_(std::move(launch)),
      meter_(meter) {
  for (std::size_t g = 0; g < params_per_bucket_.size(); ++g) {
    for (std::size_t b = 0; b < params_per_bucket_[g].size(); ++b) order_.emplace_back(g, b);
  }
}

void BucketReducer::begin_backward(bool reducing) {
  reducing_ = reducing;
  next_ = 0;
  pending_ = params_per_bucket_;
}

void BucketReducer::arrive(std::size_t group, std::size_t bucket) {
  --pending_[group][bucket];
  launch_ready();
}

void BucketReducer::launch_ready() {
  if (!reducing_) return;
  while (next_ < order_.size()) {
    const auto [g, b] = order_[next_];
    if (pending_[g][b] > 0) return;
    try {
      in_flight_.push_back(launch_(g, b));
    } catch (...) {
      abandon();
      throw;
    }
    ++next_;
    if (in_flight_.size() > max_in_flight_) finish_oldest(in_flight_.size() - max_in_flight_);
  }
}

void BucketReducer::check_all_launched() const {
  ZT_INTERNAL_ASSERT(!reducing_ || next_ == order_.size(), "buckets left unlaunched");
}

void BucketReducer::finish_oldest(std::size_t count) {
  try {
    std::vector<comm::Work*> works;
    for (std::size_t i = 0; i < count; ++i) works.push_back(&in_flight_[i].work);
    comm::wait_all(works);
  } catch (...) {
    abandon();
    throw;
  }
  for (std::size_t i = 0; i < count; ++i) {
    PendingReduce& r = in_flight_.front();
    if (r.write_back.defined()) {
      if (r.accumulate) {
        r.write_back.add_(r.result);
      } else {
        r.write_back.copy_(r.result);
      }
    }
    settle(r);
    in_flight_.pop_front();
  }
}

void BucketReducer::wait_all() { finish_oldest(in_flight_.size()); }

void BucketReducer::abandon() noexcept {
  std::vector<comm::Work*> works;
  for (PendingReduce& r : in_flight_) works.push_back(&r.work);
  try {
    comm::wait_all(works);
  } catch (...) {
    // The caller rethrows the first error; these reductions have ended either way.
  }
  for (PendingReduce& r : in_flight_) settle(r);
  in_flight_.clear();
}

void BucketReducer::settle(PendingReduce& r) noexcept {
  if (r.keep_alive.defined()) meter_->release(r.keep_alive);
  if (r.done) r.done();
}

}  // namespace zerotrain::stages
