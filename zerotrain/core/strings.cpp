#include "zerotrain/core/strings.h"

#include <algorithm>
#include <cctype>

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

}  // namespace zerotrain::strings
