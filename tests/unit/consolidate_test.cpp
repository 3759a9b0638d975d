// Consolidation without LibTorch (checkpoint/consolidate.h) on checkpoints written by the
// same writer the engine uses (tests/support/synthetic_checkpoint.h): the values, the
// dtypes, HF's sharding and index, what an earlier consolidation left, and damaged input.
// The engine's own checkpoints are consolidated in consolidate_engine_test.cpp.
#include "zerotrain/checkpoint/consolidate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/synthetic_checkpoint.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using test::SyntheticSpec;
using test::SyntheticTensor;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("zt_consolidate_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// Three ranks, parameters straddling their boundaries, a frozen bf16 and an F64 parameter,
// an I64 and an F32 buffer.
SyntheticSpec mixed_spec() {
  SyntheticSpec s;
  s.world_size = 3;
  s.params = {{"emb.weight", {7, 5}}, {"fc.weight", {4, 3}}, {"fc.bias", {4}}, {"scale", {}}};
  s.frozen = {{"frozen.bf16", {6}, Dtype::kBF16}, {"frozen.f64", {3}, Dtype::kF64}};
  s.buffers = {{"bn.num_batches_tracked", {}, Dtype::kI64}, {"bn.running_mean", {4}, Dtype::kF32}};
  return s;
}

struct ReadBack {
  SafetensorsHeader header;
  std::string bytes;   // the whole file
  std::vector<char> tensor(const std::string& name) const {
    const TensorEntry* t = header.find(name);
    if (t == nullptr) return {};
    const char* p = bytes.data() + header.data_offset + t->begin;
    return {p, p + t->nbytes()};
  }
};

ReadBack read_back(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  ReadBack r;
  r.bytes.assign(std::istreambuf_iterator<char>(in), {});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(r.bytes[static_cast<size_t>(i)]);
  r.header = parse_safetensors_header(std::string_view(r.bytes).substr(8, n), static_cast<int64_t>(r.bytes.size()),
                                      file.string());
  return r;
}

template <class T>
std::vector<T> as(const std::vector<char>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(FloatConvert, KnownValues) {
  EXPECT_EQ(bf16_from_float(1.0f), 0x3f80);
  EXPECT_EQ(bf16_from_float(float_of(0x3f808000u)), 0x3f80);   // a tie goes to the even neighbour
  EXPECT_EQ(bf16_from_float(float_of(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bf16_from_float(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_from_float(float_of(0x7f7fffffu)), 0x7f80);   // FLT_MAX rounds to inf
  EXPECT_EQ(bf16_from_float(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(float_from_bf16(bf16_from_float(std::nanf("")))));
  EXPECT_EQ(f16_from_float(1.0f), 0x3c00);
  EXPECT_EQ(f16_from_float(65504.0f), 0x7bff);
  EXPECT_EQ(f16_from_float(65519.99f), 0x7bff);
  EXPECT_EQ(f16_from_float(65520.0f), 0x7c00);                 // the tie rounds up to inf
  EXPECT_EQ(f16_from_float(-INFINITY), 0xfc00);
  EXPECT_EQ(f16_from_float(std::ldexp(1.0f, -14)), 0x0400);    // the smallest normal
  EXPECT_EQ(f16_from_float(std::ldexp(1.0f, -24)), 0x0001);    // the smallest subnormal
  EXPECT_EQ(f16_from_float(std::ldexp(1.0f, -25)), 0x0000);    // the tie between 0 and it: even
  EXPECT_EQ(f16_from_float(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f16_from_float(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 units ties to 2
  EXPECT_EQ(f16_from_float(std::ldexp(1023.5f, -24)), 0x0400); // rounds up into the normals
  EXPECT_EQ(f16_from_float(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(float_from_f16(f16_from_float(std::nanf("")))));
}

TEST(FloatConvert, EverySixteenBitValueRoundTrips) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    if (std::isnan(float_from_f16(b))) {
      EXPECT_TRUE(std::isnan(float_from_f16(f16_from_float(float_from_f16(b)))));
    } else {
      ASSERT_EQ(f16_from_float(float_from_f16(b)), b) << std::hex << bits;
    }
    if (!std::isnan(float_from_bf16(b))) {
      ASSERT_EQ(bf16_from_float(float_from_bf16(b)), b) << std::hex << bits;
    }
  }
}

TEST(Consolidate, PlanSharesHuggingFacesSplit) {
  Manifest m;
  m.world_size = 1;
  m.params = {{"a", {10}, "fp32", 0, {}}, {"b", {30}, "fp32", 0, {}}, {"c", {10}, "fp32", 0, {}},
              {"d", {10}, "fp32", 0, {}}};
  m.buffers = {{"n", {2}, "I64"}};
  // 40, 120, 40, 40 and 16 bytes into shards of at most 100: b is larger than a shard and
  // gets one at once; a and c share the next until d would tip it over; d and n the last.
  const ConsolidationPlan plan = plan_consolidation(m, {.dtype = Dtype::kF32, .max_shard_bytes = 100}, "m.json");
  ASSERT_EQ(plan.output.shards.size(), 3u);
  EXPECT_EQ(plan.output.shards[0].file, "model-00001-of-00003.safetensors");
  EXPECT_EQ(plan.output.shards[0].tensors, (std::vector<size_t>{1}));       // b: larger than a shard, its own
  EXPECT_EQ(plan.output.shards[1].tensors, (std::vector<size_t>{0, 2}));    // a, c: d would tip it over
  EXPECT_EQ(plan.output.shards[2].tensors, (std::vector<size_t>{4, 3}));    // d, n; the I64 buffer first (alignment)
  EXPECT_EQ(plan.output.total_tensor_bytes, 40 + 120 + 40 + 40 + 16);
  EXPECT_EQ(plan.buffer_bytes, 120);
  const ConsolidationPlan one = plan_consolidation(m, {.dtype = Dtype::kBF16}, "m.json");
  ASSERT_EQ(one.output.shards.size(), 1u);
  EXPECT_EQ(one.output.shards[0].file, "model.safetensors");
  EXPECT_EQ(one.output.total_tensor_bytes, 60 * 2 + 16);   // parameters in bf16, the buffer as saved
  EXPECT_EQ(one.buffer_bytes, 120);                 // read as saved: fp32
}

TEST(Consolidate, PlanRefusesWhatCannotBeWritten) {
  Manifest m;
  m.params = {{"a", {1}, "fp32", 0, {}}};
  m.buffers = {{"a", {1}, "F32"}};
  EXPECT_NE(error_of([&] { plan_consolidation(m, {}, "m.json"); }).find("\"a\" names two tensors"), std::string::npos);
  m.buffers = {{"b", {1}, "F8"}};
  EXPECT_NE(error_of([&] { plan_consolidation(m, {}, "m.json"); }).find("buffer \"b\" has dtype \"F8\""), std::string::npos);
  m.buffers = {{"__metadata__", {1}, "F32"}};
  EXPECT_NE(error_of([&] { plan_consolidation(m, {}, "m.json"); }).find("cannot be a tensor name"), std::string::npos);
  m.buffers.clear();
  EXPECT_THROW(plan_consolidation(m, {.dtype = Dtype::kF64}, "m.json"), UsageError);
  EXPECT_THROW(plan_consolidation(m, {.max_shard_bytes = 0}, "m.json"), UsageError);
}

TEST(Consolidate, WholeTensorsFromEveryRankInFp32) {
  const fs::path dir = fresh_dir("fp32");
  const SyntheticSpec spec = mixed_spec();
  const Manifest m = test::write_synthetic_checkpoint(dir / "ckpt", spec);
  ASSERT_GT(m.params[0].fragments.size(), 1u);   // straddles ranks
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  const ConsolidatedOutput out = consolidate(reader, dir / "out");
  ASSERT_EQ(out.files.size(), 1u);
  EXPECT_EQ(out.files[0], dir / "out" / "model.safetensors");
  EXPECT_FALSE(fs::exists(dir / "out" / "model.safetensors.index.json"));
  const ReadBack r = read_back(out.files[0]);
  EXPECT_EQ(r.header.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(r.header.tensors.size(), 8u);
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const TensorEntry* t = r.header.find(spec.params[i].name);
    ASSERT_NE(t, nullptr) << spec.params[i].name;
    EXPECT_EQ(t->dtype, Dtype::kF32);
    EXPECT_EQ(t->shape, spec.params[i].shape);
    const auto values = as<float>(r.tensor(spec.params[i].name));
    ASSERT_EQ(static_cast<int64_t>(values.size()), spec.params[i].numel());
    for (size_t k = 0; k < values.size(); ++k) {
      ASSERT_EQ(bits_of(values[k]), bits_of(test::synthetic_value(i, 0, static_cast<int64_t>(k)))) << spec.params[i].name << "[" << k << "]";
    }
  }
  // Frozen parameters in the output dtype, whatever they were saved in.
  const auto frozen_bf16 = as<float>(r.tensor("frozen.bf16"));
  const auto saved_bf16 = as<uint16_t>(test::synthetic_bytes(spec.frozen[0], spec.params.size()));
  ASSERT_EQ(frozen_bf16.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(frozen_bf16[k], float_from_bf16(saved_bf16[k]));
  const auto frozen_f64 = as<float>(r.tensor("frozen.f64"));
  const auto saved_f64 = as<double>(test::synthetic_bytes(spec.frozen[1], spec.params.size() + 1));
  ASSERT_EQ(frozen_f64.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(frozen_f64[k], static_cast<float>(saved_f64[k]));
  // Buffers exactly as saved.
  EXPECT_EQ(r.header.find("bn.num_batches_tracked")->dtype, Dtype::kI64);
  EXPECT_EQ(r.tensor("bn.num_batches_tracked"), test::synthetic_bytes(spec.buffers[0], spec.params.size() + 2));
  EXPECT_EQ(r.tensor("bn.running_mean"), test::synthetic_bytes(spec.buffers[1], spec.params.size() + 3));
  // Every tensor aligned to its element size within the file.
  for (const auto& t : r.header.tensors) EXPECT_EQ((r.header.data_offset + t.begin) % dtype_size(t.dtype), 0) << t.name;
  EXPECT_EQ(out.plan.buffer_bytes, 35 * 4);   // the largest tensor, emb.weight in fp32
  fs::remove_all(dir);
}

TEST(Consolidate, SixteenBitOutputRoundsToNearestEven) {
  const fs::path dir = fresh_dir("16bit");
  const SyntheticSpec spec = mixed_spec();
  test::write_synthetic_checkpoint(dir / "ckpt", spec);
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  for (Dtype dtype : {Dtype::kBF16, Dtype::kF16}) {
    const ConsolidatedOutput out = consolidate(reader, dir / "out", {.dtype = dtype});
    const ReadBack r = read_back(out.files[0]);
    for (size_t i = 0; i < spec.params.size(); ++i) {
      EXPECT_EQ(r.header.find(spec.params[i].name)->dtype, dtype);
      const auto values = as<uint16_t>(r.tensor(spec.params[i].name));
      ASSERT_EQ(static_cast<int64_t>(values.size()), spec.params[i].numel());
      for (size_t k = 0; k < values.size(); ++k) {
        const float v = test::synthetic_value(i, 0, static_cast<int64_t>(k));
        ASSERT_EQ(values[k], dtype == Dtype::kBF16 ? bf16_from_float(v) : f16_from_float(v));
      }
    }
    EXPECT_EQ(r.header.find("frozen.f64")->dtype, dtype);
    EXPECT_EQ(r.header.find("bn.running_mean")->dtype, Dtype::kF32);   // buffers keep their dtype
  }
  fs::remove_all(dir);
}

TEST(Consolidate, ShardsWithAnIndexAndNoStaleFiles) {
  const fs::path dir = fresh_dir("shards");
  const SyntheticSpec spec = mixed_spec();
  test::write_synthetic_checkpoint(dir / "ckpt", spec);
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out" / "model.safetensors") << "an earlier consolidation";
  std::ofstream(dir / "out" / "model-00009-of-00009.safetensors") << "older still";
  std::ofstream(dir / "out" / "notes.txt") << "the user's";
  const ConsolidatedOutput out = consolidate(reader, dir / "out", {.max_shard_bytes = 64});
  ASSERT_GT(out.files.size(), 2u);
  EXPECT_EQ(out.files.back(), dir / "out" / "model.safetensors.index.json");
  EXPECT_FALSE(fs::exists(dir / "out" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "out" / "model-00009-of-00009.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "out" / "notes.txt"));
  EXPECT_EQ(out.removed.size(), 2u);

  std::ifstream in(dir / "out" / "model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"], out.plan.output.total_tensor_bytes);
  const size_t shards = out.files.size() - 1;
  std::map<std::string, std::string> where;
  int64_t bytes = 0;
  for (size_t s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards);
    EXPECT_EQ(out.files[s].filename(), name);
    const ReadBack r = read_back(out.files[s]);
    for (const auto& t : r.header.tensors) {
      where[t.name] = name;
      bytes += t.nbytes();
      EXPECT_TRUE(t.nbytes() <= 64 || r.header.tensors.size() == 1) << t.name << " shares an oversized shard";
    }
  }
  EXPECT_EQ(bytes, out.plan.output.total_tensor_bytes);
  const auto weight_map = index["weight_map"].get<std::map<std::string, std::string>>();
  EXPECT_EQ(weight_map, where);
  EXPECT_EQ(where.size(), 8u);

  // Consolidated again into one file: the shards and the index go.
  const ConsolidatedOutput again = consolidate(reader, dir / "out");
  EXPECT_EQ(again.removed.size(), shards + 1);
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "out" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(out.files[0]));
  fs::remove_all(dir);
}

TEST(Consolidate, DamagedFragmentLeavesNoFile) {
  const fs::path dir = fresh_dir("damaged");
  const SyntheticSpec spec = mixed_spec();
  test::write_synthetic_checkpoint(dir / "ckpt", spec);
  {
    // A bit flips in rank 1's part of emb.weight's fp32 master.
    CheckpointReader before(dir / "ckpt" / spec.tag);
    const SafetensorsHeader& h = before.header(1);
    const TensorEntry* t = h.find("fp32/emb.weight[18:35]");
    ASSERT_NE(t, nullptr);
    std::fstream f(dir / "ckpt" / spec.tag / "rank_00001.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(h.data_offset + t->begin + 5);
    const char c = static_cast<char>(f.get());
    f.seekp(h.data_offset + t->begin + 5);
    f.put(static_cast<char>(c ^ 0x04));
  }
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  const std::string message = error_of([&] { consolidate(reader, dir / "out"); });
  EXPECT_NE(message.find("rank_00001.safetensors: tensor \""), std::string::npos) << message;
  EXPECT_NE(message.find("does not match its checksum"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(dir / "out"));   // not even a temporary file
  fs::remove_all(dir);
}

TEST(Consolidate, FragmentMissingFromItsFileFailsBeforeWriting) {
  const fs::path dir = fresh_dir("missing");
  SyntheticSpec spec = mixed_spec();
  Manifest m = test::write_synthetic_checkpoint(dir / "ckpt", spec);
  // The manifest names a fragment the file does not have (the ranges moved by one).
  m.params[0].fragments[0].end -= 1;
  m.params[0].fragments[1].begin -= 1;
  AtomicFile manifest(dir / "ckpt" / spec.tag / kManifestName);
  manifest.write(manifest_to_json(m).dump());
  manifest.commit();
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  const std::string message = error_of([&] { consolidate(reader, dir / "out"); });
  EXPECT_NE(message.find("rank_00000.safetensors: has no tensor \"fp32/emb.weight[0:"), std::string::npos) << message;
  EXPECT_NE(message.find("of parameter \"emb.weight\""), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

TEST(Consolidate, MissingRankFile) {
  const fs::path dir = fresh_dir("norank");
  const SyntheticSpec spec = mixed_spec();
  test::write_synthetic_checkpoint(dir / "ckpt", spec);
  fs::remove(dir / "ckpt" / spec.tag / "rank_00002.safetensors");
  CheckpointReader reader(dir / "ckpt" / spec.tag);
  const std::string message = error_of([&] { consolidate(reader, dir / "out"); });
  EXPECT_NE(message.find("rank_00002.safetensors: missing"), std::string::npos) << message;
  fs::remove_all(dir);
}

TEST(LocateTag, LatestTagOrDirectory) {
  const fs::path dir = fresh_dir("locate");
  SyntheticSpec spec = mixed_spec();
  spec.tag = "first";
  test::write_synthetic_checkpoint(dir, spec);
  spec.tag = "second";
  test::write_synthetic_checkpoint(dir, spec);   // `latest` now names it
  fs::create_directories(dir / ".third.partial");
  EXPECT_EQ(locate_tag(dir, "").tag, "second");
  EXPECT_TRUE(locate_tag(dir, "").from_latest);
  EXPECT_EQ(locate_tag(dir, "first").tag_dir, dir / "first");
  const LocatedTag direct = locate_tag(dir / "first", "");
  EXPECT_EQ(direct.tag, "first");
  EXPECT_EQ(fs::weakly_canonical(direct.save_dir), fs::weakly_canonical(dir));
  const DirectoryListing listing = list_directory(dir);
  EXPECT_EQ(listing.tags, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(listing.unfinished, (std::vector<std::string>{".third.partial"}));

  std::string message = error_of([&] { locate_tag(dir, "third"); });
  EXPECT_NE(message.find("third: no such tag; tags in " + dir.string() + ": first, second"), std::string::npos) << message;
  fs::remove(dir / "latest");
  message = error_of([&] { locate_tag(dir, ""); });
  EXPECT_NE(message.find("latest: missing, so the tag to use is unknown; pass --tag (tags in"), std::string::npos)
      << message;
  message = error_of([&] { locate_tag(dir / "nope", ""); });
  EXPECT_NE(message.find("nope: no such checkpoint directory"), std::string::npos) << message;
  message = error_of([&] { locate_tag(dir, "../first"); });
  EXPECT_NE(message.find("cannot name a tag directory"), std::string::npos) << message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zerotrain::checkpoint
