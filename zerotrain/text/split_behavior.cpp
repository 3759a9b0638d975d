#include "zerotrain/text/split_behavior.h"

#include <algorithm>

namespace zerotrain::text {

std::vector<Span> split_spans(size_t length, const std::vector<RegexMatch>& matches, SplitBehavior behavior,
                              bool invert) {
  // The whole text as alternating stretches, each marked as a match or not.
  struct Stretch {
    Span span;
    bool is_match;
  };
  std::vector<Stretch> stretches;
  stretches.reserve(matches.size() * 2 + 1);
  size_t from = 0;
  for (const RegexMatch& m : matches) {
    if (m.begin > from) stretches.push_back({{from, m.begin}, invert});
    stretches.push_back({{m.begin, m.end}, !invert});
    from = m.end;
  }
  if (from < length) stretches.push_back({{from, length}, invert});

  std::vector<Span> out;
  out.reserve(stretches.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Stretch& s : stretches) {
        if (!s.is_match) out.push_back(s.span);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Stretch& s : stretches) out.push_back(s.span);
      break;
    case SplitBehavior::kContiguous:
      for (const Stretch& s : stretches) {
        if (!out.empty() && s.is_match == previous_match) {
          out.back().end = s.span.end;
        } else {
          out.push_back(s.span);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Stretch& s : stretches) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.span.end;
        } else {
          out.push_back(s.span);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      // Walked from the end: a match joins the piece after it.
      for (auto it = stretches.rbegin(); it != stretches.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->span.begin;
        } else {
          out.push_back(it->span);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const Span& s) { return s.end == s.begin; }), out.end());
  return out;
}

}  // namespace zerotrain::text
