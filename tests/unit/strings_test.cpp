#include "zerotrain/core/strings.h"

#include <gtest/gtest.h>

namespace zerotrain::strings {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("stage", "stage"), 0u);
  EXPECT_EQ(edit_distance("stage", "stag"), 1u);
  EXPECT_EQ(edit_distance("stage", "stages"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(ClosestMatch, FindsTyposAndIgnoresUnrelatedWords) {
  std::vector<std::string> keys = {"stage3_max_live_parameters", "stage3_param_persistence_threshold",
                                   "overlap_comm", "reduce_bucket_size"};
  EXPECT_EQ(closest_match("stage3_max_live_parameter", keys), "stage3_max_live_parameters");
  EXPECT_EQ(closest_match("stage3_param_persitance_threshold", keys), "stage3_param_persistence_threshold");
  EXPECT_EQ(closest_match("comm_overlap", keys), "overlap_comm");   // words reordered
  EXPECT_EQ(closest_match("cuda_visible_devices", keys), std::nullopt);
  EXPECT_EQ(closest_match("x", keys), std::nullopt);
}

TEST(JoinWords, UsesTheLastSeparator) {
  EXPECT_EQ(join_words({}), "");
  EXPECT_EQ(join_words({"a"}), "a");
  EXPECT_EQ(join_words({"a", "b", "c"}), "a, b or c");
  EXPECT_EQ(join_words({"a", "b"}, " and "), "a and b");
}

}  // namespace
}  // namespace zerotrain::strings
