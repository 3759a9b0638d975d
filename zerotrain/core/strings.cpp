#include "zerotrain/core/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::strings {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitute = diagonal + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

namespace {
// The '_'-separated words of a key, sorted: "comm_overlap" and "overlap_comm" share them.
std::vector<std::string> sorted_words(std::string_view key) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('_', start);
    if (end == std::string_view::npos) end = key.size();
    if (end > start) words.emplace_back(key.substr(start, end - start));
    start = end + 1;
  }
  std::sort(words.begin(), words.end());
  return words;
}
}  // namespace

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = SIZE_MAX;
  const auto word_set = sorted_words(word);
  for (const auto& candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    if (word_set.size() > 1 && sorted_words(candidate) == word_set) distance = 1;   // words reordered
    size_t limit = std::max<size_t>(2, std::max(word.size(), candidate.size()) / 3);
    bool contains = word.size() >= 4 && (candidate.find(word) != std::string::npos ||
                                         word.find(candidate) != std::string_view::npos);
    if ((distance <= limit || contains) && distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

std::string join_words(const std::vector<std::string>& words, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += (i + 1 == words.size()) ? std::string(last_sep) : std::string(", ");
    out += words[i];
  }
  return out;
}

double parse_count(std::string_view text, std::string_view what) {
  std::string digits;
  bool plain = true;   // digits, a point, an exponent: no hex, inf or nan, which stod takes
  for (char ch : text) {
    if (ch == ',' || ch == '_') continue;
    plain = plain && (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.' || ch == 'e' || ch == 'E' ||
                      ch == '+' || ch == '-');
    digits += ch;
  }
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (!plain || digits.empty() || used != digits.size() || !(value >= 0) || !std::isfinite(value)) {
    throw UsageError(detail::str(what, ": '", text, "' is not a count; write it as 2783959040, 2,783,959,040 or 2.78e9"));
  }
  return value;
}

int64_t parse_bytes(std::string_view text, std::string_view what) {
  // Case does not matter ("16gb", "16GiB"); a bare K, M, G or T is binary, as in ulimit,
  // Slurm's --mem and docker ("16G" = 16GiB). Longer suffixes are tried first.
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"K", 1024.0},   {"M", 1048576.0},   {"G", 1073741824.0},   {"T", 1099511627776.0},
      {"B", 1.0}};
  auto ends_with_ci = [](std::string_view word, std::string_view suffix) {
    if (word.size() <= suffix.size()) return false;
    const std::string_view tail = word.substr(word.size() - suffix.size());
    for (size_t i = 0; i < suffix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(tail[i])) != std::tolower(static_cast<unsigned char>(suffix[i]))) {
        return false;
      }
    }
    return true;
  };
  std::string_view number = text;
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
  double unit = 1;
  for (const auto& [suffix, scale] : kUnits) {
    if (ends_with_ci(number, suffix)) {
      number.remove_suffix(std::string_view(suffix).size());
      unit = scale;
      break;
    }
  }
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
  try {
    const double bytes = parse_count(number, what) * unit;
    if (bytes >= 9.2e18) throw UsageError("too large");
    return static_cast<int64_t>(bytes);
  } catch (const UsageError&) {
    throw UsageError(detail::str(what, ": '", text, "' is not a size; write bytes (17179869184) or a number with "
                                 "KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB or K, M, G, T (powers of "
                                 "1024), in any case (16GiB, 16gb, 16G)"));
  }
}

}  // namespace zerotrain::strings
