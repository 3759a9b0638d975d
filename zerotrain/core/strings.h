// Small string helpers for messages: edit distance and "did you mean".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::strings {

// Levenshtein distance (insert, delete, substitute; each costs 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a plausible typo: at most
// a third of the longer word's length (and at least 2) edits away, the same '_'-separated
// words in another order, or a candidate that contains `word` / is contained in it.
// Ties go to the earlier candidate.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);

// "a, b and c"
std::string join_words(const std::vector<std::string>& words, std::string_view last_sep = " or ");

}  // namespace zerotrain::strings
