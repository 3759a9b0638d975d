#include "zerotrain/stages/unit_schedule.h"

#include <algorithm>
#include <unordered_map>

namespace zerotrain::stages {

UnitSchedule::UnitSchedule(std::vector<std::vector<int>> events, std::vector<int64_t> unit_numel,
                           ScheduleOptions options)
    : events_(std::move(events)), unit_numel_(std::move(unit_numel)), options_(options) {
  before_.assign(events_.size() + 1, 0);
  for (std::size_t e = 0; e < events_.size(); ++e) {
    use_begin_.push_back(next_use_.size());
    int64_t n = 0;
    for (int u : events_[e]) n += unit_numel_[u];
    before_[e + 1] = before_[e] + n;
    next_use_.resize(next_use_.size() + events_[e].size(), events_.size());
  }
  use_begin_.push_back(next_use_.size());
  std::unordered_map<int, std::size_t> later;   // unit -> the next event using it, scanning backwards
  for (std::size_t e = events_.size(); e-- > 0;) {
    for (std::size_t k = 0; k < events_[e].size(); ++k) {
      const int u = events_[e][k];
      auto it = later.find(u);
      if (it != later.end()) next_use_[use_begin_[e] + k] = it->second;
    }
    for (int u : events_[e]) later[u] = e;
  }
}

std::vector<int> UnitSchedule::prefetch(std::size_t event, const std::function<bool(int)>& gathered,
                                        int64_t live_numel, std::vector<std::size_t>& wanted_at) const {
  std::vector<int> out;
  int64_t budget = std::min(options_.prefetch_numel, options_.max_live_numel - live_numel);
  for (std::size_t e = event + 1; e < events_.size() && budget > 0; ++e) {
    for (int u : events_[e]) {
      const bool pending = std::find(out.begin(), out.end(), u) != out.end();
      if (pending || gathered(u)) {
        wanted_at[u] = std::max(wanted_at[u], e);
        continue;
      }
      if (unit_numel_[u] > budget) return out;
      out.push_back(u);
      budget -= unit_numel_[u];
    }
  }
  return out;
}

bool UnitSchedule::keep(std::size_t event, int unit, int64_t live_numel,
                        const std::vector<std::size_t>& wanted_at) const {
  if (live_numel > options_.max_live_numel) return false;
  if (wanted_at[unit] > event) return true;
  const auto& uses = events_[event];
  const auto k = static_cast<std::size_t>(std::find(uses.begin(), uses.end(), unit) - uses.begin());
  if (k == uses.size()) return false;
  const std::size_t next = next_use_[use_begin_[event] + k];
  if (next == events_.size()) return false;
  // DeepSpeed's distance: the elements the events in between gather.
  return before_[next] - before_[event + 1] < options_.reuse_distance_numel;
}

int64_t simulate_gathered_peak(const UnitSchedule& schedule, std::size_t forward_events) {
  int64_t units = 0;
  for (std::size_t e = 0; e < schedule.size(); ++e) {
    for (int u : schedule.uses(e)) units = std::max<int64_t>(units, u + 1);
  }
  std::vector<bool> gathered(units, false);
  std::vector<std::size_t> wanted_at(units, 0), last_backward(units, 0);
  for (std::size_t e = forward_events; e < schedule.size(); ++e) {
    for (int u : schedule.uses(e)) last_backward[u] = e;
  }
  int64_t live = 0, peak = 0;
  auto gather = [&](int u) {
    if (gathered[u]) return;
    gathered[u] = true;
    live += schedule.numel(u);
    peak = std::max(peak, live);
  };
  auto release = [&](int u) {
    if (!gathered[u]) return;
    gathered[u] = false;
    live -= schedule.numel(u);
  };
  for (std::size_t e = 0; e < schedule.size(); ++e) {
    for (int u : schedule.uses(e)) gather(u);
    for (int u : schedule.prefetch(e, [&](int v) { return static_cast<bool>(gathered[v]); }, live, wanted_at)) gather(u);
    for (int u : schedule.uses(e)) {
      const bool forward = e < forward_events;
      if (forward ? !schedule.keep(e, u, live, wanted_at) : last_backward[u] == e) release(u);
    }
  }
  return peak;
}

}  // namespace zerotrain::stages
