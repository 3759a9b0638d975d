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
  s.stage = 2;
  s.precision = ze::Precision::kBf16;
  EXPECT_EQ(ze::estimate(m, s).params, 2 * psi);
  EXPECT_GT(s0.activations, 0);
  s.activation_checkpointing = true;
  EXPECT_LT(ze::activation_bytes(m, s), ze::estimate(m, {.stage = 2, .precision = ze::Precision::kBf16}).activations);
}

// A Llama from a folder (models/hf: hf_shape_of sets these from config.json): 4 layers,
// hidden 256, 4 heads sharing 2 kv heads of 64, a SwiGLU MLP of 688, block 128.
ze::ModelShape llama_shape() {
  ze::ModelShape m;
  m.name = "llama";
  m.param_numels = {1024 * 256, 4 * 725248, 256, 256 * 1024};
  m.largest_layer_params = 256 * 1024;
  m.decoder = ze::DecoderDims{.n_layer = 4, .n_head = 4, .head_dim = 64, .hidden = 256, .intermediate = 688,
                              .vocab_size = 1024, .n_kv_head = 2, .block_size = 128};
  return m;
}

// Everything such a decoder keeps is per token (its attention keeps no probabilities), so
// the activations follow the tokens of a micro-batch: micro_batch x seq_len.
TEST(DetailedEstimate, DecoderActivationsFollowTheTokens) {
  const auto m = llama_shape();
  const int64_t at_block = ze::activation_bytes(m, {.micro_batch = 2});
  EXPECT_GT(at_block, 0);
  EXPECT_EQ(ze::activation_bytes(m, {.micro_batch = 4}), 2 * at_block);
  EXPECT_EQ(ze::activation_bytes(m, {.micro_batch = 2, .seq_len = 64}) * 2, at_block);
  EXPECT_EQ(ze::activation_bytes(m, {.micro_batch = 2, .seq_len = 128}), at_block);   // the block size by default
  // Per token, in fp32: each block 2 x 3076 (norms) + 16 x 256 + 16 (attention) + 16 x 688
  // (MLP); the final norm and the fp32 log-softmax 3076 + 4 x 1024.
  EXPECT_EQ(at_block, 2 * 128 * (4 * 21272 + 3076 + 4096));
  const int64_t bf16 = ze::activation_bytes(m, {.precision = ze::Precision::kBf16, .micro_batch = 2});
  EXPECT_LT(bf16, at_block);
  EXPECT_GT(2 * bf16, at_block);   // the norms' fp32 copies and the fp32 log-softmax stay
  const int64_t checkpointed = ze::activation_bytes(m, {.micro_batch = 2, .activation_checkpointing = true});
  EXPECT_LT(2 * checkpointed, at_block);
  // The estimate's rows carry them, and the loss's fp32 gradients in the backward transient.
  const ze::Breakdown b = ze::estimate(m, {.micro_batch = 2});
  EXPECT_EQ(b.activations, at_block);
  EXPECT_GE(b.backward_transient, 2 * 128 * 1024 * 2 * 4);
  // A sliding window shorter than the sequence adds each layer's [seq, seq] mask.
  auto mistral = m;
  mistral.decoder->sliding_window = 32;
  EXPECT_EQ(ze::activation_bytes(mistral, {.micro_batch = 2}), at_block + 4 * 128 * 128 * 4);
  mistral.decoder->sliding_window = 128;
  EXPECT_EQ(ze::activation_bytes(mistral, {.micro_batch = 2}), at_block);
}

// As the GPT's: a sequence longer than the block the model trains at is refused, naming the
// way to raise it; the models without a sequence refuse --seq_len.
TEST(DetailedEstimate, DecoderRefusesASequenceLongerThanItsBlock) {
  const auto m = llama_shape();
  EXPECT_NO_THROW(ze::estimate(m, {.seq_len = 128}));
  try {
    ze::estimate(m, {.seq_len = 129});
    FAIL() << "--seq_len 129 was accepted for a block of 128";
  } catch (const zerotrain::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--seq_len 129 is longer than the model's block_size 128"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--model_config block_size=N"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ze::estimate(gpt_shape(), {.seq_len = 129}), zerotrain::UsageError);
  ze::ModelShape counts;
  counts.param_numels = {1000};
  EXPECT_THROW(ze::estimate(counts, {.seq_len = 16}), zerotrain::UsageError);
  EXPECT_EQ(ze::activation_bytes(counts, {}), 0);
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
  auto a = ze::advise(m, base, {.memory_per_rank = peak(0), .ranks_per_node = 4});
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.setup.stage, 0);
  // Just too little for stages 0 and 1: stage 2, with its config fragment.
  a = ze::advise(m, base, {.memory_per_rank = peak(2), .ranks_per_node = 4});
  EXPECT_TRUE(a.fits);
  EXPECT_EQ(a.setup.stage, 2);
  EXPECT_NE(a.config_json.find("\"stage\": 2"), std::string::npos) << a.config_json;
  EXPECT_NE(a.why.find("stage 0: "), std::string::npos);
  EXPECT_NE(a.why.find("does not fit"), std::string::npos);
  // Not even the runtime fits: nothing.
  a = ze::advise(m, base, {.memory_per_rank = 1 << 20, .ranks_per_node = 4});
  EXPECT_FALSE(a.fits);
  EXPECT_THROW(ze::advise(m, base, {.memory_per_rank = 0, .ranks_per_node = 4}), zerotrain::UsageError);
}

TEST(Advisor, OffloadNeedsTheHostMemoryItMovesThere) {
  const auto m = gpt_shape();
  ze::Setup base;
  base.world_size = 2;
  ze::Setup s3 = base;
  s3.stage = 3;
  const int64_t below_stage3 = ze::estimate(m, s3).peak() - 1;
  auto a = ze::advise(m, base, {.memory_per_rank = below_stage3, .ranks_per_node = 2});
  ASSERT_TRUE(a.fits);
  EXPECT_EQ(a.setup.offload_optimizer, ze::Offload::kCpu);
  EXPECT_NE(a.config_json.find("\"offload_optimizer\": {\"device\": \"cpu\""), std::string::npos) << a.config_json;
  a = ze::advise(m, base, {.memory_per_rank = below_stage3, .host_memory = 1024, .ranks_per_node = 2});
  EXPECT_FALSE(a.fits);
  EXPECT_NE(a.why.find("the host memory does not fit"), std::string::npos) << a.why;
}

// A model known by its counts: one million parameters in ten tensors, on two ranks a shard
// of 500000 (at stage 3 one unit of them all).
ze::ModelShape million_params() {
  ze::ModelShape m;
  m.name = "a model";
  m.param_numels.assign(10, 100000);
  m.largest_layer_params = 100000;
  return m;
}

// Offload as the engine does it (docs/offload.md): host memory keeps the same states and
// drops the step's fp32 gradient copy; NVMe keeps a few sub-group buffers in memory and
// the states in aligned slots on disk; stage 3's parameter shard goes to disk with
// offload_param nvme. (estimate_engine_test checks the same against the engine.)
TEST(DetailedEstimate, OffloadMovesWhatTheEngineMoves) {
  const auto m = million_params();
  constexpr int64_t kShard = 500000;
  ze::Setup s;
  s.world_size = 2;
  s.stage = 2;
  s.precision = ze::Precision::kBf16;
  s.reduce_bucket_size = 100000;   // a tensor per bucket: 200 KB in bf16; the fp32 gradient copy is 2 MB
  const auto plain = ze::estimate(m, s);
  EXPECT_EQ(plain.master, kShard * 4);
  EXPECT_EQ(plain.buffers, kShard * 4 + 100000 * 2);   // the copy, and the one staging bucket kept beside it
  EXPECT_EQ(plain.host, 0);
  EXPECT_EQ(plain.disk, 0);

  s.offload_optimizer = ze::Offload::kCpu;
  const auto cpu = ze::estimate(m, s);
  EXPECT_EQ(cpu.master, kShard * 4);
  EXPECT_EQ(cpu.optimizer, kShard * 8);
  EXPECT_EQ(cpu.buffers, 100000 * 2);   // the bucket only: the fused step reads bf16 gradients
  EXPECT_EQ(cpu.host, kShard * 12);
  EXPECT_EQ(cpu.disk, 0);
  EXPECT_EQ(cpu.params, plain.params);
  EXPECT_EQ(cpu.grads, plain.grads);

  s.offload_optimizer = ze::Offload::kNvme;
  s.sub_group_size = 100000;
  s.pipeline_read = s.pipeline_write = true;
  const int64_t slot = 401408;   // 400000 bytes rounded up to 4096
  const auto nvme = ze::estimate(m, s);
  EXPECT_EQ(nvme.master, 0);
  EXPECT_EQ(nvme.optimizer, 0);
  EXPECT_EQ(nvme.buffers, 100000 * 2 + 3 * 3 * slot);   // 3 sets of master, exp_avg, exp_avg_sq
  EXPECT_EQ(nvme.host, 3 * 3 * slot);
  EXPECT_EQ(nvme.disk, 3 * 5 * slot);                    // 5 sub-groups of each
  s.pipeline_write = false;
  s.buffer_count = 9;   // DeepSpeed's count of single tensors: 3 sets
  EXPECT_EQ(ze::estimate(m, s).host, 3 * 3 * slot);
  s.buffer_count = 4;
  EXPECT_EQ(ze::estimate(m, s).host, 2 * 3 * slot);
  s.sub_group_size = 1000000000;   // capped at the shard
  EXPECT_EQ(ze::estimate(m, s).disk, 3 * 2002944);   // 2000000 bytes rounded up

  // Stage 3 in fp32: the parameter shard was the master; optimizer offload keeps its own.
  s = {.world_size = 2, .stage = 3, .param_persistence_threshold = 0};
  const auto s3 = ze::estimate(m, s);
  EXPECT_EQ(s3.params, 0);   // nothing resident: the one unit is sharded
  s.offload_optimizer = ze::Offload::kCpu;
  EXPECT_EQ(ze::estimate(m, s).params, kShard * 4);
  EXPECT_EQ(ze::estimate(m, s).master, kShard * 4);
  // Parameter offload to NVMe: the shard leaves memory, one aligned slot per unit on disk;
  // in fp32 the master is then a shard of its own.
  s.offload_optimizer = ze::Offload::kNone;
  s.offload_param = ze::Offload::kNvme;
  s.precision = ze::Precision::kBf16;
  const auto params_nvme = ze::estimate(m, s);
  EXPECT_EQ(params_nvme.params, 0);
  EXPECT_EQ(params_nvme.master, kShard * 4);
  EXPECT_EQ(params_nvme.disk, 1003520);   // 1000000 bytes rounded up
  s.precision = ze::Precision::kFp32;
  EXPECT_EQ(ze::estimate(m, s).master, kShard * 4);
  EXPECT_EQ(ze::estimate(m, s).disk, 2002944);
  // The disk is not memory: it is in neither the model states nor the peak. Both offloads to
  // NVMe in fp32: memory keeps the gradient shard, the staging buffer of the one unit's
  // bucket (1000000 elements) and one set of sub-group buffers (buffer_count 4 makes one set
  // of master, exp_avg and exp_avg_sq, a 2002944-byte slot each); the master, the moments
  // and the parameter shard are on disk, a slot each.
  const auto in_memory = ze::estimate(m, s);   // the optimizer states still in memory
  s.offload_optimizer = ze::Offload::kNvme;
  const auto both = ze::estimate(m, s);
  EXPECT_EQ(both.params, 0);
  EXPECT_EQ(both.grads, kShard * 4);
  EXPECT_EQ(both.master, 0);
  EXPECT_EQ(both.optimizer, 0);
  EXPECT_EQ(both.buffers, 1000000 * 4 + 3 * 2002944);
  EXPECT_EQ(both.host, 3 * 2002944);
  EXPECT_EQ(both.disk, 3 * 2002944 + 2002944);
  EXPECT_EQ(both.model_states(), kShard * 4 + 1000000 * 4 + 3 * 2002944);
  // The peak adds only the gathered largest layer and its gradient (100000 x 4 bytes each).
  EXPECT_EQ(both.peak(), kShard * 4 + 1000000 * 4 + 3 * 2002944 + 2 * 100000 * 4);
  // With the optimizer states in memory (master 4 and moments 8 bytes an element of the
  // shard, no swap buffers) the peak differs by those buffers alone, although that setup
  // has three slots less on disk.
  EXPECT_EQ(in_memory.disk, 2002944);
  EXPECT_EQ(in_memory.peak() - both.peak(), kShard * 12 - 3 * 2002944);
  s.stage = 2;
  EXPECT_THROW(ze::estimate(m, s), zerotrain::UsageError);   // parameter offload below stage 3
}

TEST(DetailedEstimate, ReportHasEveryOffloadRowWithItsDisk) {
  ze::Setup s;
  s.world_size = 2;
  const std::string report = ze::detailed_report(million_params(), s);
  for (const char* row : {"| stage 1, offload_optimizer=nvme |", "| stage 2, offload_optimizer=cpu |",
                          "| stage 3, offload_param=nvme |", "| stage 3, offload_optimizer=nvme, offload_param=nvme |",
                          "| host | disk |", "sub_group_size 1000000000"}) {
    EXPECT_NE(report.find(row), std::string::npos) << row << " in:\n" << report;
  }
  EXPECT_EQ(report.find("not yet"), std::string::npos) << report;
}

// Two billion parameters on two ranks in bf16: host memory offload needs 14 GB of host
// memory per rank (12 bytes of states and the 16-bit shard per parameter of the shard);
// NVMe offload needs its buffers only.
ze::ModelShape two_billion_params() {
  ze::ModelShape m;
  m.name = "a large model";
  m.param_numels.assign(40, 50000000);
  m.largest_layer_params = 50000000;
  return m;
}

ze::Breakdown nvme_breakdown(const ze::ModelShape& m, ze::Setup s, ze::Offload param, int64_t sub_group_size) {
  s.stage = 3;
  s.offload_optimizer = ze::Offload::kNvme;
  s.offload_param = param;
  s.sub_group_size = sub_group_size;
  s.pipeline_read = s.pipeline_write = true;
  return ze::estimate(m, s);
}

TEST(Advisor, NvmeOffloadOnlyWithADiskBudgetAndWhenNothingElseFits) {
  const auto m = two_billion_params();
  ze::Setup base;
  base.world_size = 2;
  base.precision = ze::Precision::kBf16;
  const auto both = nvme_breakdown(m, base, ze::Offload::kNvme, 100000000);
  ASSERT_EQ(both.host, int64_t{3} * 3 * 400003072);   // three sets of 1e8 fp32 elements, each padded
  ze::Budget budget{.memory_per_rank = both.peak() - both.host, .host_memory = 2 * both.host, .ranks_per_node = 2};
  // Without a disk budget NVMe is never considered: nothing fits.
  auto a = ze::advise(m, base, budget);
  EXPECT_FALSE(a.fits);
  EXPECT_EQ(a.why.find("nvme"), std::string::npos) << a.why;
  EXPECT_NE(a.why.find("the host memory does not fit"), std::string::npos) << a.why;
  // With one: the optimizer states alone on disk leave the parameter shard in memory, which
  // does not fit; with the parameters too it does, at the largest sub-group.
  budget.disk_bytes = 2 * both.disk;
  a = ze::advise(m, base, budget);
  ASSERT_TRUE(a.fits) << a.why;
  EXPECT_EQ(a.setup.stage, 3);
  EXPECT_EQ(a.setup.offload_optimizer, ze::Offload::kNvme);
  EXPECT_EQ(a.setup.offload_param, ze::Offload::kNvme);
  EXPECT_EQ(a.setup.sub_group_size, 100000000);
  EXPECT_EQ(a.breakdown.disk, both.disk);
  for (const char* part : {"\"sub_group_size\": 1e8", "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": ",
                           "\"pipeline_read\": true, \"pipeline_write\": true", "\"offload_param\": {\"device\": \"nvme\"",
                           "\"bf16\": {\"enabled\": true}"}) {
    EXPECT_NE(a.config_json.find(part), std::string::npos) << part << " in:\n" << a.config_json;
  }
  EXPECT_NE(a.why.find("stage 3, offload_optimizer=nvme: "), std::string::npos) << a.why;
  EXPECT_NE(a.note.find("sub_group_size 1e8"), std::string::npos) << a.note;
  // Room for the parameter shard: the optimizer states alone go to disk.
  const auto optimizer_only = nvme_breakdown(m, base, ze::Offload::kNone, 100000000);
  budget.memory_per_rank = optimizer_only.peak() - optimizer_only.host;
  a = ze::advise(m, base, budget);
  ASSERT_TRUE(a.fits) << a.why;
  EXPECT_EQ(a.setup.offload_param, ze::Offload::kNone);
  EXPECT_EQ(a.config_json.find("offload_param"), std::string::npos) << a.config_json;
  // Host memory too small for buffers of 1e8 elements: smaller sub-groups.
  budget.host_memory = 2 * (both.host / 10 + (64 << 20));
  a = ze::advise(m, base, budget);
  ASSERT_TRUE(a.fits) << a.why;
  EXPECT_EQ(a.setup.sub_group_size, 10000000);
  EXPECT_NE(a.config_json.find("\"sub_group_size\": 1e7"), std::string::npos) << a.config_json;
  // A disk too small for the swap files.
  budget.disk_bytes = both.disk;   // one rank's files, for two ranks
  a = ze::advise(m, base, budget);
  EXPECT_FALSE(a.fits);
  EXPECT_NE(a.why.find("the disk does not fit"), std::string::npos) << a.why;
}

// The memory check reads the offload keys as the engine does.
TEST(FitCheck, SetupFromConfigReadsTheOffloadKeys) {
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "sub_group_size": 1e7,
          "offload_optimizer": {"device": "nvme", "nvme_path": "swap", "buffer_count": 8, "pipeline_read": true},
          "offload_param": {"device": "cpu"}}})");
  const ze::Setup s = ze::setup_from_config(config, 2);
  EXPECT_EQ(s.offload_optimizer, ze::Offload::kNvme);
  EXPECT_EQ(s.offload_param, ze::Offload::kCpu);
  EXPECT_EQ(s.sub_group_size, 10000000);
  EXPECT_EQ(s.buffer_count, 8);
  EXPECT_TRUE(s.pipeline_read);
  EXPECT_FALSE(s.pipeline_write);
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
