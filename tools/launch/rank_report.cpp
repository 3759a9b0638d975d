#include "tools/launch/rank_report.h"

#include <charconv>

#include "zerotrain/core/error.h"

namespace zerotrain::launch {
namespace {

constexpr std::string_view kEndTag = "\x1ezerotrain-rank-ended ";

// Reads "KEY=INTEGER" at the front of `text` and drops it (and one space after it).
template <class Int>
bool take(std::string_view& text, std::string_view key, Int& value) {
  if (text.substr(0, key.size()) != key || text.substr(key.size(), 1) != "=") return false;
  text.remove_prefix(key.size() + 1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc()) return false;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return true;
}

}  // namespace

std::string format_rank_end(const RankEnd& end) {
  return detail::str(kEndTag, "rank=", end.rank, " status=", end.status, " failed=", end.failed ? 1 : 0,
                     " time_ns=", end.time_ns, "\n");
}

std::optional<RankEnd> parse_rank_end(std::string_view line) {
  if (line.substr(0, kEndTag.size()) != kEndTag) return std::nullopt;
  line.remove_prefix(kEndTag.size());
  RankEnd end;
  int failed = 0;
  if (!take(line, "rank", end.rank) || !take(line, "status", end.status) || !take(line, "failed", failed) ||
      !take(line, "time_ns", end.time_ns) || !line.empty() || end.rank < 0) {
    return std::nullopt;
  }
  end.failed = failed != 0;
  return end;
}

std::optional<int> parse_rank_prefix(std::string_view line, std::string_view* rest) {
  constexpr std::string_view kOpen = "[rank ";
  if (line.substr(0, kOpen.size()) != kOpen) return std::nullopt;
  line.remove_prefix(kOpen.size());
  int rank = -1;
  const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), rank);
  line.remove_prefix(static_cast<size_t>(end - line.data()));
  if (ec != std::errc() || rank < 0 || line.substr(0, 2) != "] ") return std::nullopt;
  if (rest != nullptr) *rest = line.substr(2);
  return rank;
}

}  // namespace zerotrain::launch
