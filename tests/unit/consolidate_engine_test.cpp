// Consolidating the engine's own checkpoints (checkpoint/consolidate.h): after training at
// ZeRO stage 3 on 2 ranks and stage 1 on 4 (ranks as threads), the consolidated fp32 output
// is the engine's fp32 master weights bit for bit, and a bf16 or fp16 output is LibTorch's
// conversion of them; also when split into shards. The 16-bit conversions themselves are
// checked against LibTorch on every rounding boundary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "tests/support/stage3_models.h"
#include "tests/support/thread_ranks.h"
#include "zerotrain/checkpoint/consolidate.h"
#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::test {
namespace {

namespace fs = std::filesystem;
namespace ckpt = checkpoint;
using Weights = std::map<std::string, torch::Tensor>;

constexpr int kSteps = 3;
constexpr int64_t kBatch = 24;

struct Training {
  int world = 2;
  int stage = 3;
  std::string dtype = "fp32";
  bool freeze_fc1_bias = false;
};
void PrintTo(const Training& s, std::ostream* os) {
  *os << "world " << s.world << " stage " << s.stage << " " << s.dtype << (s.freeze_fc1_bias ? " frozen" : "");
}

Config config_for(int stage, const std::string& dtype) {
  std::string json = R"({"train_batch_size": 24, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "zero_optimization": {"stage": )" + std::to_string(stage) + R"(, "reduce_bucket_size": 50, "stage3_param_persistence_threshold": 0})";
  if (dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  return Config::from_string(json + "}");
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("zt_consolidate_engine_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// Trains kSteps steps, saves into `dir`, and returns rank 0's gathered weights in the model's
// dtype at that moment.
Weights train_and_save(const Training& s, const fs::path& dir) {
  Weights weights;
  torch::manual_seed(5);
  const auto x = torch::randn({kSteps, kBatch, 8}), y = torch::randn({kSteps, kBatch, 4});
  const auto errors = run_ranks(s.world, [&](int rank, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(s.freeze_fc1_bias);
    Engine engine = initialize(net.ptr(), config_for(s.stage, s.dtype), {.comm = comm});
    const int64_t micro = kBatch / s.world;
    for (int step = 0; step < kSteps; ++step) {
      const auto input = x[step].narrow(0, rank * micro, micro).to(engine.model_dtype());
      engine.backward(torch::mse_loss(net->forward(input).to(torch::kFloat), y[step].narrow(0, rank * micro, micro)));
      engine.step();
    }
    engine.save_checkpoint(dir.string());
    for (auto& [name, t] : engine.consolidated_16bit_state_dict()) {
      if (rank == 0) weights[name] = t;
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return weights;
}

// The fp32 master weights of a checkpoint, independently of consolidation: loaded into an
// fp32 engine on one rank at stage 0, whose parameters are then the master values exactly.
Weights master_weights(const fs::path& dir, bool freeze_fc1_bias) {
  Weights weights;
  const auto errors = run_ranks(1, [&](int, comm::Communicator& comm) {
    ShardedParityNet net = make_sharded_parity_net(freeze_fc1_bias);
    Engine engine = initialize(net.ptr(), config_for(0, "fp32"), {.comm = comm});
    ASSERT_TRUE(engine.load_checkpoint(dir.string()).has_value());
    for (auto& [name, t] : engine.consolidated_16bit_state_dict()) weights[name] = t;
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return weights;
}

// Every tensor of a consolidated output directory (one file or shards), as LibTorch tensors.
Weights read_output(const fs::path& out_dir) {
  Weights weights;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    ckpt::ReadOnlyFile file(entry.path());
    unsigned char len[8];
    file.read_at(0, len, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    std::string header(n, '\0');
    file.read_at(8, header.data(), static_cast<int64_t>(n));
    const auto parsed = ckpt::parse_safetensors_header(header, file.size(), entry.path().string());
    EXPECT_EQ(parsed.metadata.at("format"), "pt");
    for (const auto& t : parsed.tensors) {
      const auto dtype = t.dtype == ckpt::Dtype::kF32 ? torch::kFloat : t.dtype == ckpt::Dtype::kBF16 ? torch::kBFloat16 : torch::kHalf;
      torch::Tensor value = torch::empty(t.shape, dtype);
      file.read_at(parsed.data_offset + t.begin, value.data_ptr(), t.nbytes());
      EXPECT_TRUE(weights.emplace(t.name, value).second) << t.name << " twice";
    }
  }
  return weights;
}

// Bit for bit, names, shapes and dtypes included.
void expect_identical(const Weights& actual, const Weights& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, e] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name << " missing";
    const torch::Tensor& a = it->second;
    ASSERT_EQ(a.scalar_type(), e.scalar_type()) << what << ": " << name;
    ASSERT_EQ(a.sizes(), e.sizes()) << what << ": " << name;
    const auto bits = e.element_size() == 4 ? torch::kInt : torch::kShort;
    EXPECT_TRUE(torch::equal(a.contiguous().view(bits), e.contiguous().view(bits))) << what << ": " << name;
  }
}

Weights converted(const Weights& w, torch::ScalarType dtype) {
  Weights out;
  for (const auto& [name, t] : w) out[name] = t.to(dtype);
  return out;
}

class ConsolidateEngine : public ::testing::TestWithParam<Training> {};

TEST_P(ConsolidateEngine, OutputIsTheMasterWeights) {
  const Training s = GetParam();
  const fs::path dir = fresh_dir("ckpt"), out = fresh_dir("out");
  const Weights model = train_and_save(s, dir);
  ASSERT_FALSE(model.empty());
  const auto located = ckpt::read_latest_tag(dir);
  ASSERT_TRUE(located.has_value());
  ckpt::CheckpointReader reader(dir / *located);

  ckpt::consolidate(reader, out, {.dtype = ckpt::Dtype::kF32});
  const Weights fp32 = read_output(out);
  if (s.dtype == "fp32") {
    expect_identical(fp32, model, "fp32 output vs the engine's gathered weights");   // the master itself
  } else {
    const Weights master = master_weights(dir, s.freeze_fc1_bias);
    // A frozen parameter has no master: it was saved in bf16 and widens exactly.
    expect_identical(fp32, master, "fp32 output vs the master loaded back");
    // The master rounds to the model's bf16 weights, as the engine's own cast does.
    ckpt::consolidate(reader, out, {.dtype = ckpt::Dtype::kBF16});
    expect_identical(read_output(out), model, "bf16 output vs the engine's bf16 weights");
  }
  ckpt::consolidate(reader, out, {.dtype = ckpt::Dtype::kF16});
  expect_identical(read_output(out), converted(fp32, torch::kHalf), "fp16 output vs LibTorch's conversion");

  // Shards of at most 100 bytes: fc1.weight (512 B) alone, the rest spread over several.
  const auto sharded = ckpt::consolidate(reader, out, {.dtype = ckpt::Dtype::kF32, .max_shard_bytes = 100});
  EXPECT_GT(sharded.plan.output.shards.size(), 3u);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  expect_identical(read_output(out), fp32, "sharded fp32 output vs one file");
  fs::remove_all(dir);
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Stages, ConsolidateEngine,
                         ::testing::Values(Training{2, 3, "fp32", false}, Training{4, 1, "fp32", true},
                                           Training{2, 3, "bf16", true}, Training{4, 1, "bf16", false}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world) + "_stage" +
                                  std::to_string(info.param.stage) + "_" + info.param.dtype +
                                  (info.param.freeze_fc1_bias ? "_frozen" : "");
                         });

// ---- The conversions against LibTorch ----

// fp32 values at and around every rounding boundary of a 16-bit format whose values are
// `widen(b)` for every bit pattern b: each value, the midpoints to its neighbour, and one
// fp32 ulp either side of them; plus infinities, NaN and random bits.
std::vector<float> boundary_values(float (*widen)(uint16_t)) {
  std::vector<float> out;
  for (uint32_t b = 0; b < 0xffff; ++b) {
    const float lo = widen(static_cast<uint16_t>(b)), hi = widen(static_cast<uint16_t>(b + 1));
    if (!std::isfinite(lo) || !std::isfinite(hi) || (lo < 0) != (hi < 0)) continue;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float v : {lo, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) out.push_back(v);
  }
  for (float v : {INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, 3.4028235e38f}) out.push_back(v);
  std::mt19937 random(7);
  for (int i = 0; i < 200000; ++i) {
    const float v = ckpt::float_of(static_cast<uint32_t>(random()));
    if (!std::isnan(v)) out.push_back(v);
  }
  return out;
}

void expect_like_libtorch(std::vector<float> values, torch::ScalarType dtype, uint16_t (*narrow)(float)) {
  const auto n = static_cast<int64_t>(values.size());
  const auto theirs = torch::from_blob(values.data(), {n}).to(dtype).contiguous();
  const auto* their_bits = static_cast<const uint16_t*>(theirs.data_ptr());
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t ours = narrow(values[static_cast<size_t>(i)]);
    if (ours != their_bits[i] && differ++ < 5) {
      ADD_FAILURE() << values[static_cast<size_t>(i)] << " (0x" << std::hex << ckpt::bits_of(values[static_cast<size_t>(i)])
                    << "): ours 0x" << ours << ", LibTorch's 0x" << their_bits[i];
    }
  }
  EXPECT_EQ(differ, 0) << "of " << n;
  // NaN stays NaN.
  const float nan = std::nanf("");
  EXPECT_TRUE(torch::isnan(torch::tensor({static_cast<int16_t>(narrow(nan))}, torch::kShort).view(dtype).to(torch::kFloat)).item<bool>());
}

TEST(FloatConvertVsLibTorch, Bf16RoundsLikeLibTorch) {
  expect_like_libtorch(boundary_values(ckpt::float_from_bf16), torch::kBFloat16, ckpt::bf16_from_float);
}

TEST(FloatConvertVsLibTorch, Fp16RoundsLikeLibTorch) {
  expect_like_libtorch(boundary_values(ckpt::float_from_f16), torch::kHalf, ckpt::f16_from_float);
}

TEST(FloatConvertVsLibTorch, WideningIsExact) {
  const auto all = torch::arange(0, 65536, torch::kInt).to(torch::kShort);
  using Widen = float (*)(uint16_t);
  for (auto [dtype, widen] : {std::pair<torch::ScalarType, Widen>{torch::kBFloat16, ckpt::float_from_bf16},
                              std::pair<torch::ScalarType, Widen>{torch::kHalf, ckpt::float_from_f16}}) {
    const auto theirs = all.view(dtype).to(torch::kFloat).contiguous();
    const float* t = theirs.data_ptr<float>();
    for (int64_t b = 0; b < 65536; ++b) {
      const float o = widen(static_cast<uint16_t>(static_cast<uint32_t>(b)));
      if (std::isnan(t[b])) {
        ASSERT_TRUE(std::isnan(o)) << b;
      } else {
        ASSERT_EQ(ckpt::bits_of(o), ckpt::bits_of(t[b])) << b;
      }
    }
  }
}

}  // namespace
}  // namespace zerotrain::test
