// Small string helpers for messages: edit distance and "did you mean".
#pragma once

#include <cstddef>
#include <cstdint>
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

// A count as people write it: "2783959040", "2,783,959,040", "2_783_959_040", "13e9".
// Throws UsageError naming `what` when the text is not a non-negative number.
double parse_count(std::string_view text, std::string_view what);

// A size in bytes: a count, optionally followed by KB, MB, GB, TB (powers of 1000) or KiB,
// MiB, GiB, TiB or K, M, G, T (powers of 1024), in any case: "17179869184", "16GiB", "8 GB",
// "16gb", "16G", "1.5TiB".
int64_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace zerotrain::strings
