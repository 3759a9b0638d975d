// How a pattern's matches cut a text: tokenizers' SplitDelimiterBehavior.
#pragma once

#include "zerotrain/text/regex.h"

#include <string_view>
#include <vector>

namespace zerotrain::text {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin;
  size_t end;
};

// The pieces of a text of `length` bytes that `matches` (sorted, non-overlapping) cut it into
// under `behavior`; `invert` swaps the roles of matches and the text between them. Empty
// pieces are left out.
std::vector<Span> split_spans(size_t length, const std::vector<RegexMatch>& matches, SplitBehavior behavior,
                              bool invert);

}  // namespace zerotrain::text
