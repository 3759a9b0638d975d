// The estimators: DeepSpeed's printouts byte for byte against DeepSpeed's own output
// (tests/data/deepspeed_estimates.txt, made by running its functions), the guide's table,
// the number parsing of the command line, and the stage advisor's procedure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "zerotrain/core/error.h"
#include "zerotrain/core/host_memory.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/estimate/deepspeed_estimator.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/estimate/fit_check.h"

namespace ze = zerotrain::estimate;

namespace {

struct GoldenCase {
  double params, largest;
  ze::Cluster cluster;
  std::string printout;
};

std::vector<GoldenCase> golden_cases() {
  std::ifstream in(std::string(ZEROTRAIN_TEST_DATA_DIR) + "/deepspeed_estimates.txt");
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '(') {
      GoldenCase c;
      std::string inner = line.substr(1, line.size() - 2);
      for (char& ch : inner) ch = ch == ',' ? ' ' : ch;
      std::istringstream fields(inner);
      fields >> c.params >> c.largest >> c.cluster.num_gpus_per_node >> c.cluster.num_nodes >>
          c.cluster.additional_buffer_factor;
      cases.push_back(c);
    } else if (!cases.empty()) {
      cases.back().printout += line + "\n";
    }
  }
  return cases;
}

TEST(DeepSpeedEstimator, PrintsWhatDeepSpeedPrints) {
  const auto cases = golden_cases();
  ASSERT_EQ(cases.size(), 7u) << "tests/data/deepspeed_estimates.txt is missing or changed";
  for (const auto& c : cases) {
    EXPECT_EQ(ze::zero2_report(c.params, c.cluster) + ze::zero3_report(c.params, c.largest, c.cluster), c.printout)
        << "P=" << c.params << " L=" << c.largest;
  }
}

TEST(DeepSpeedEstimator, TheGuidesTableDigitForDigit) {
  // HF Transformers' DeepSpeed guide: bigscience/T0_3B on 1 node x 1 GPU.
  EXPECT_EQ(ze::zero3_report(2783959040, 65798144, {}),
            "Estimated memory needed for params, optim states and gradients for a:\n"
            "HW: Setup with 1 node, 1 GPU per node.\n"
            "SW: Model with 2783M total params, 65M largest layer params.\n"
            "  per CPU  |  per GPU |   Options\n"
            "   70.00GB |   0.25GB | offload_param=cpu , offload_optimizer=cpu , zero_init=1\n"
            "   70.00GB |   0.25GB | offload_param=cpu , offload_optimizer=cpu , zero_init=0\n"
            "   62.23GB |   5.43GB | offload_param=none, offload_optimizer=cpu , zero_init=1\n"
            "   62.23GB |   5.43GB | offload_param=none, offload_optimizer=cpu , zero_init=0\n"
            "    0.37GB |  46.91GB | offload_param=none, offload_optimizer=none, zero_init=1\n"
            "   15.56GB |  46.91GB | offload_param=none, offload_optimizer=none, zero_init=0\n");
}

TEST(DeepSpeedEstimator, BytesFollowTheFormulas) {
  const double p = 1e9;
  const auto z2 = ze::zero2_mem_needs(p, {8, 1, 1.5}, false);
  EXPECT_EQ(z2.gpu_bytes, static_cast<int64_t>(2 * p + 18 * p / 8));
  EXPECT_EQ(z2.cpu_bytes, static_cast<int64_t>(p * 4 * 8 * 1.5));
  const auto z3 = ze::zero3_mem_needs(p, 1e7, {8, 2, 1.5}, true, true, true);
  EXPECT_EQ(z3.gpu_bytes, 4e7);
  EXPECT_EQ(z3.cpu_bytes, static_cast<int64_t>(p * 18 * 0.5 * 1.5));
  EXPECT_THROW(ze::zero2_mem_needs(-1, {}, true), zerotrain::UsageError);
  EXPECT_THROW(ze::zero2_mem_needs(1, {0, 1, 1.5}, true), zerotrain::UsageError);
}

TEST(Strings, CountsAndSizesAsPeopleWriteThem) {
  using zerotrain::strings::parse_bytes;
  using zerotrain::strings::parse_count;
  EXPECT_EQ(parse_count("2783959040", "n"), 2783959040.0);
  EXPECT_EQ(parse_count("2,783,959,040", "n"), 2783959040.0);
  EXPECT_EQ(parse_count("13e9", "n"), 13e9);
  EXPECT_THROW(parse_count("3B", "n"), zerotrain::UsageError);
  EXPECT_THROW(parse_count("-4", "n"), zerotrain::UsageError);
  EXPECT_EQ(parse_bytes("16GiB", "m"), 16LL << 30);
  EXPECT_EQ(parse_bytes("8 GB", "m"), 8000000000LL);
  EXPECT_EQ(parse_bytes("1.5KiB", "m"), 1536);
  EXPECT_EQ(parse_bytes("4096", "m"), 4096);
  // The spellings people type: any case; a bare K, M, G, T is binary (ulimit, Slurm, docker).
  EXPECT_EQ(parse_bytes("16gb", "m"), 16'000'000'000LL);
  EXPECT_EQ(parse_bytes("16GB", "m"), 16'000'000'000LL);
  EXPECT_EQ(parse_bytes("16G", "m"), 16LL << 30);
  EXPECT_EQ(parse_bytes("16g", "m"), 16LL << 30);
  EXPECT_EQ(parse_bytes("16 G", "m"), 16LL << 30);
  EXPECT_EQ(parse_bytes("16gib", "m"), 16LL << 30);
  EXPECT_EQ(parse_bytes("512M", "m"), 512LL << 20);
  EXPECT_EQ(parse_bytes("2t", "m"), 2LL << 40);
  EXPECT_EQ(parse_bytes("100b", "m"), 100);
  for (const char* bad : {"16 gigs", "nan", "inf G", "-1G", "G", "16GiBs"}) {
    EXPECT_THROW(parse_bytes(bad, "m"), zerotrain::UsageError) << bad;
  }
  try {
    parse_bytes("16 gigs", "--memory_per_rank");
    FAIL();
  } catch (const zerotrain::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--memory_per_rank: '16 gigs' is not a size"), std::string::npos) << e.what();
  }
}

ze::ModelShape gpt_shape() {
  // The built-in GPT, preset small (models.cpp), parameter by parameter in model order.
  const int64_t c = 256, v = 1024, t = 128;
  ze::ModelShape m;
  m.name = "gpt small";
  m.param_numels = {v * c, t * c};
  for (int layer = 0; layer < 4; ++layer) {
    for (int64_t n : {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c}) m.param_numels.push_back(n);
  }
  for (int64_t n : {c, c, v * c}) m.param_numels.push_back(n);
  m.largest_layer_params = v * c;
  m.gpt = ze::GptDims{4, 4, c, v, t};
  return m;
}

TEST(DetailedEstimate, ShardsShrinkWithTheStage) {
  const auto m = gpt_shape();
  ze::Setup s;
  s.world_size = 4;
  s.reduce_bucket_size = 200000;
  const int64_t psi = m.total_params();
  s.stage = 0;
  const auto s0 = ze::estimate(m, s);
  EXPECT_EQ(s0.model_states(), 16 * psi);   // DDP: 4 + 4 + 8 bytes per parameter
  s.stage = 1;
  const auto s1 = ze::estimate(m, s);
  s.stage = 2;
  const auto s2 = ze::estimate(m, s);
  s.stage = 3;
  const auto s3 = ze::estimate(m, s);
  EXPECT_LT(s1.optimizer, s0.optimizer / 3);
  EXPECT_LT(s2.grads, s1.grads / 4);
  EXPECT_LT(s3.params, s2.params);
  EXPECT_TRUE(s2.implemented);
  EXPECT_TRUE(s3.implemented);
  s.stage = 3;
  s.offload_param = true;
  EXPECT_FALSE(ze::estimate(m, s).implemented);   // offload comes later
  s.offload_param = false;
  s.stage = 2;
  s.precision = ze::Precision::kBf16;
  EXPECT_EQ(ze::estimate(m, s).params, 2 * psi);
  EXPECT_GT(s0.activations, 0);
  s.activation_checkpointing = true;
  EXPECT_LT(ze::activation_bytes(m, s), ze::estimate(m, {.stage = 2, .precision = ze::Precision::kBf16}).activations);
}

TEST(Advisor, TakesTheFastestSetupThatFits) {
  const auto m = gpt_shape();
  ze::Setup base;
  base.world_size = 4;
  base.micro_batch = 8;
  base.reduce_bucket_size = 200000;   // with one bucket of the whole model, stage 2 stages all of it
  base.runtime_bytes = 150 << 20;
  auto peak = [&](int stage) {
    ze::Setup s = base;
    s.stage = stage;
    return ze::estimate(m, s).peak();
  };
  // Enough for stage 0: stage 0.
  auto a = ze::advise(m, base, peak(0), std::nullopt, 4);
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.setup.stage, 0);
  // Just too little for stages 0 and 1: stage 2, with its config fragment.
  a = ze::advise(m, base, peak(2), std::nullopt, 4);
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.setup.stage, 2);
  EXPECT_NE(a.config_json.find("\"stage\": 2"), std::string::npos) << a.config_json;
  EXPECT_NE(a.why.find("stage 0: "), std::string::npos);
  EXPECT_NE(a.why.find("does not fit"), std::string::npos);
  // Not even the runtime fits: nothing.
  a = ze::advise(m, base, 1 << 20, std::nullopt, 4);
  EXPECT_FALSE(a.fits);
  EXPECT_THROW(ze::advise(m, base, 0, std::nullopt, 4), zerotrain::UsageError);
}

TEST(Advisor, OffloadNeedsTheHostMemoryItMovesThere) {
  const auto m = gpt_shape();
  ze::Setup base;
  base.world_size = 2;
  ze::Setup s3 = base;
  s3.stage = 3;
  const int64_t below_stage3 = ze::estimate(m, s3).peak() - 1;
  auto a = ze::advise(m, base, below_stage3, std::nullopt, 2);
  ASSERT_TRUE(a.fits);
  EXPECT_TRUE(a.setup.offload_optimizer);
  EXPECT_NE(a.config_json.find("\"offload_optimizer\": {\"device\": \"cpu\""), std::string::npos) << a.config_json;
  a = ze::advise(m, base, below_stage3, /*host_memory=*/1024, 2);
  EXPECT_FALSE(a.fits);
  EXPECT_NE(a.why.find("the host memory does not fit"), std::string::npos) << a.why;
}

// What the host has left: MemAvailable or the cgroup's room, or what the user says.
TEST(FitCheck, ReadsTheMemoryAvailableOrTheOverride) {
  ::unsetenv("ZEROTRAIN_MEMORY_AVAILABLE");
  const auto read = zerotrain::memory::available();
  ASSERT_TRUE(read.has_value());
  EXPECT_GT(read->bytes, 0);
  ::setenv("ZEROTRAIN_MEMORY_AVAILABLE", "3GiB", 1);
  EXPECT_EQ(zerotrain::memory::available()->bytes, 3LL << 30);
  ::unsetenv("ZEROTRAIN_MEMORY_AVAILABLE");
}

// A job whose estimated peak exceeds what is available is refused with the advisor's
// answer; one close to it is tight; the ranks of a host share what it has.
TEST(FitCheck, ComparesThePeakOfEveryRankOnTheHostWithWhatIsAvailable) {
  const auto m = gpt_shape();
  ze::Setup setup;
  setup.world_size = 4;
  setup.stage = 0;
  setup.micro_batch = 8;
  const int64_t peak = ze::estimate(m, setup).peak();
  auto verdict_with = [&](int64_t available, int ranks) {
    ::setenv("ZEROTRAIN_MEMORY_AVAILABLE", std::to_string(available).c_str(), 1);
    auto v = ze::check_fit(m, setup, {.ranks_on_host = ranks});
    ::unsetenv("ZEROTRAIN_MEMORY_AVAILABLE");
    return v;
  };
  EXPECT_EQ(verdict_with(4 * peak, 1).kind, ze::FitVerdict::Kind::kFits);
  EXPECT_EQ(verdict_with(peak + peak / 20, 1).kind, ze::FitVerdict::Kind::kTight);
  const auto shared = verdict_with(2 * peak, 4);   // four ranks on this host need 4 x peak
  EXPECT_EQ(shared.kind, ze::FitVerdict::Kind::kTooLarge);
  EXPECT_EQ(shared.needed_bytes, 4 * peak);
  for (const char* part : {"4 rank(s) x", "ZeRO stage 0", "is available (ZEROTRAIN_MEMORY_AVAILABLE)"}) {
    EXPECT_NE(shared.message.find(part), std::string::npos) << part << " in:\n" << shared.message;
  }
  // With room for a higher stage's shards but not stage 0's states, the advisor names it.
  int64_t smallest = peak;
  for (int stage : {1, 2, 3}) {
    ze::Setup s = setup;
    s.stage = stage;
    smallest = std::min(smallest, ze::estimate(m, s).peak());
  }
  ASSERT_LT(smallest, peak);
  const auto advised = verdict_with(4 * ((peak + smallest) / 2), 4);
  EXPECT_EQ(advised.kind, ze::FitVerdict::Kind::kTooLarge);
  EXPECT_NE(advised.message.find("fits (zerotrain advise); use:"), std::string::npos) << advised.message;
  EXPECT_NE(advised.message.find("\"stage\""), std::string::npos) << advised.message;
}

}  // namespace
