// ZeRO-3's trace-driven schedule as numbers (no LibTorch), shared by the stage and the
// estimator: the units each event of a micro-step uses, in the order the first micro-step
// met them (each forward entry, then each backward entry), and from it, DeepSpeed's two
// decisions. At each event: which units to gather ahead (stage3_prefetch_bucket_size,
// stage3_max_live_parameters). When a forward leaves a unit: whether it stays gathered for
// its next use (stage3_max_reuse_distance). Unlike DeepSpeed, a unit kept for reuse also
// counts against stage3_max_live_parameters, so the gathered parameters never pass it by
// more than the units an event itself needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace zerotrain::stages {

struct ScheduleOptions {
  int64_t prefetch_numel = 50'000'000;           // stage3_prefetch_bucket_size
  int64_t max_live_numel = 1'000'000'000;        // stage3_max_live_parameters
  int64_t reuse_distance_numel = 1'000'000'000;  // stage3_max_reuse_distance
};

class UnitSchedule {
 public:
  UnitSchedule() = default;
  // `events[e]`: the units event e gathers (the unit entered first, then those it shares
  // parameters with); `unit_numel[u]`: unit u's elements (unit 0, the resident one, is
  // never scheduled).
  UnitSchedule(std::vector<std::vector<int>> events, std::vector<int64_t> unit_numel, ScheduleOptions options);

  std::size_t size() const { return events_.size(); }
  const std::vector<int>& uses(std::size_t event) const { return events_[event]; }
  int64_t numel(int unit) const { return unit_numel_[unit]; }

  // Event `event` has its units: the units to start gathering now, in order. Scans the
  // events after it within the prefetch budget; a unit already gathered is passed over and
  // marked as wanted at that event in `wanted_at` (by unit), so leaving it does not release
  // it (DeepSpeed does the same: otherwise that use would be neither prefetched nor kept).
  std::vector<int> prefetch(std::size_t event, const std::function<bool(int)>& gathered, int64_t live_numel,
                            std::vector<std::size_t>& wanted_at) const;

  // A forward leaves unit `unit` after event `event`: whether it stays gathered, with
  // `live_numel` elements gathered now (itself included).
  bool keep(std::size_t event, int unit, int64_t live_numel, const std::vector<std::size_t>& wanted_at) const;

 private:
  std::vector<std::vector<int>> events_;
  std::vector<int64_t> unit_numel_;
  ScheduleOptions options_;
  std::vector<std::size_t> next_use_;   // per (event, use) flattened: the next event using the same unit, or size()
  std::vector<std::size_t> use_begin_;  // events_[e]'s first entry in next_use_
  std::vector<int64_t> before_;         // elements the events before e gather (prefix sums)
};

// The most elements of unit parameters gathered at once over one micro-step that follows
// `schedule`, the first `forward_events` of its events being forward entries: each event
// gathers its units and prefetches; a forward releases a unit when left unless kept; a
// backward releases it after its last backward event. The estimator's model of Stage3.
int64_t simulate_gathered_peak(const UnitSchedule& schedule, std::size_t forward_events);

}  // namespace zerotrain::stages
