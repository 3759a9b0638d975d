// The batch-size triangle, with DeepSpeed's own cases (tests/unit/runtime/test_ds_config_dict.py).
#include "zerotrain/config/batch.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/unit/config_test_util.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

using testing::contains;

struct Case {
  std::optional<int64_t> tb, mb, gas;
  int64_t ws;
  bool ok;
  BatchSizes expected;
};

std::string all_errors(const Diagnostics& d) {
  std::string out;
  for (const auto& item : d.items()) out += item.to_string() + "\n";
  return out;
}

TEST(BatchTriangle, DeepSpeedCasesAtWorldSize2) {
  const Case cases[] = {
      {32, 16, 1, 2, true, {32, 16, 1}},
      {32, 8, 2, 2, true, {32, 8, 2}},
      {33, 17, 2, 2, false, {}},
      {32, 18, 1, 2, false, {}},
  };
  for (const auto& c : cases) {
    Diagnostics d;
    auto sizes = derive_batch_sizes({c.tb, c.mb, c.gas}, c.ws, d);
    EXPECT_EQ(sizes.has_value(), c.ok) << *c.tb << "," << *c.mb << "," << *c.gas << ": " << all_errors(d);
    if (c.ok && sizes) {
      EXPECT_EQ(sizes->train_batch_size, c.expected.train_batch_size);
      EXPECT_EQ(sizes->micro_batch_per_gpu, c.expected.micro_batch_per_gpu);
      EXPECT_EQ(sizes->gradient_accumulation_steps, c.expected.gradient_accumulation_steps);
    }
  }
}

TEST(BatchTriangle, DerivesTheMissingValuesWithFloorDivision) {
  const Case cases[] = {
      {64, 8, std::nullopt, 2, true, {64, 8, 4}},            // gas = tb // mb // ws
      {64, std::nullopt, 4, 2, true, {64, 8, 4}},            // mb = tb // ws // gas
      {std::nullopt, 8, 4, 2, true, {64, 8, 4}},             // tb = mb * gas * ws
      {64, std::nullopt, std::nullopt, 4, true, {64, 16, 1}},  // gas = 1, mb = tb // ws
      {std::nullopt, 8, std::nullopt, 4, true, {32, 8, 1}},  // tb = mb * ws, gas = 1
  };
  for (const auto& c : cases) {
    Diagnostics d;
    auto sizes = derive_batch_sizes({c.tb, c.mb, c.gas}, c.ws, d);
    ASSERT_TRUE(sizes.has_value()) << all_errors(d);
    EXPECT_EQ(sizes->train_batch_size, c.expected.train_batch_size);
    EXPECT_EQ(sizes->micro_batch_per_gpu, c.expected.micro_batch_per_gpu);
    EXPECT_EQ(sizes->gradient_accumulation_steps, c.expected.gradient_accumulation_steps);
  }
}

// Products that do not fit in 64 bits are refused before any arithmetic: no wrapped value
// (a micro batch of 2^63-1 at world size 2 once printed "Train batch size: -2").
TEST(BatchTriangle, ProductsThatOverflowAreErrorsNotWrappedValues) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const BatchInputs inputs[] = {{std::nullopt, kMax, std::nullopt}, {std::nullopt, kMax / 2, 3},
                                {kMax, std::nullopt, kMax}, {kMax, kMax / 2 + 1, std::nullopt}};
  for (const auto& in : inputs) {
    Diagnostics d;
    EXPECT_FALSE(derive_batch_sizes(in, 2, d).has_value());
    const std::string e = all_errors(d);
    EXPECT_TRUE(contains(e, "fit in a 64-bit integer") || contains(e, "has to be greater than 0") ||
                contains(e, "is not equal to"))
        << e;
    EXPECT_FALSE(contains(e, ": -")) << "a wrapped, negative value: " << e;
  }
  Diagnostics d;
  derive_batch_sizes({std::nullopt, kMax, std::nullopt}, 2, d);
  EXPECT_TRUE(contains(all_errors(d), "train_micro_batch_size_per_gpu * world_size = 9223372036854775807 * 2 "
                                      "does not fit in a 64-bit integer"))
      << all_errors(d);
  // A given value of 0 never reaches a division.
  Diagnostics zero;
  EXPECT_FALSE(derive_batch_sizes({8, 0, std::nullopt}, 2, zero).has_value());
  EXPECT_TRUE(contains(all_errors(zero), "Micro batch size per gpu: 0 has to be greater than 0")) << all_errors(zero);
}

TEST(BatchTriangle, MessagesExplainTheArithmeticAndTheFix) {
  Diagnostics none;
  derive_batch_sizes({std::nullopt, std::nullopt, 4}, 2, none);
  EXPECT_TRUE(contains(all_errors(none), "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"));

  Diagnostics zero_gas;   // 33 // 17 // 2 = 0
  derive_batch_sizes({33, 17, std::nullopt}, 2, zero_gas);
  std::string e = all_errors(zero_gas);
  EXPECT_TRUE(contains(e, "Gradient accumulation steps: 0 has to be greater than 0")) << e;
  EXPECT_TRUE(contains(e, "33 // 17 // 2")) << e;
  EXPECT_TRUE(contains(e, "multiple of micro_batch * world_size = 34; use 34")) << e;

  Diagnostics uneven;     // 32 != 18 * 1 * 2
  derive_batch_sizes({32, 18, 1}, 2, uneven);
  e = all_errors(uneven);
  EXPECT_TRUE(contains(e, "32 != 18 * 1 * 2")) << e;
  EXPECT_TRUE(contains(e, "use train_batch_size 36")) << e;

  Diagnostics floor;      // 36 // 8 // 2 = 2, and 8 * 2 * 2 = 32 != 36
  derive_batch_sizes({36, 8, std::nullopt}, 2, floor);
  e = all_errors(floor);
  EXPECT_TRUE(contains(e, "36 != 8 * 2 * 2 (gradient_accumulation_steps derived as 36 // 8 // 2)")) << e;
  EXPECT_TRUE(contains(e, "use 32 or 48")) << e;
}

TEST(BatchTriangle, FinalizeSetsDerivedValuesAndSources) {
  Config c = load_config(parse_json_text(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})"));
  finalize(c, 4);
  EXPECT_EQ(c.gradient_accumulation_steps.value, 2);
  EXPECT_EQ(c.source_of("gradient_accumulation_steps"), Source::kDerived);
  EXPECT_EQ(c.source_of("train_batch_size"), Source::kFile);

  Config bad = load_config(parse_json_text(R"({"train_batch_size": 33, "train_micro_batch_size_per_gpu": 17})"));
  try {
    finalize(bad, 2);
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "batch sizes at world size 2")) << e.what();
  }
}

}  // namespace
}  // namespace zerotrain::config
