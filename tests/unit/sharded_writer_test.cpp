// Hugging Face's model files written one tensor at a time (checkpoint/sharded_writer.h): one
// file, shards with an index, a tensor larger than a shard, what an earlier save left, and a
// failure part way, which leaves nothing behind. No LibTorch.
#include "zerotrain/checkpoint/sharded_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("zt_sharded_writer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct ReadBack {
  SafetensorsHeader header;
  std::string bytes;
  std::string tensor(const std::string& name) const {
    const TensorEntry* t = header.find(name);
    return t == nullptr ? "<missing>" : bytes.substr(static_cast<size_t>(header.data_offset + t->begin),
                                                     static_cast<size_t>(t->nbytes()));
  }
};

ReadBack read_back(const fs::path& file) {
  ReadBack r;
  r.bytes = slurp(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(r.bytes[static_cast<size_t>(i)]);
  r.header = parse_safetensors_header(std::string_view(r.bytes).substr(8, n), static_cast<int64_t>(r.bytes.size()),
                                      file.string());
  return r;
}

// Distinct bytes for every tensor, so a tensor written into another's place shows.
std::string bytes_of(const OutputTensor& t, size_t index) {
  std::string b(static_cast<size_t>(t.nbytes()), '\0');
  for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>(index * 31 + k * 7 + 1);
  return b;
}

// Feeds every tensor in write order, each in pieces of `piece` bytes.
void feed(ShardedWriter& w, int64_t piece = 1 << 20) {
  for (size_t i : w.plan().write_order()) {
    const std::string b = bytes_of(w.plan().tensors[i], i);
    for (size_t at = 0; at < b.size(); at += static_cast<size_t>(piece)) {
      ASSERT_EQ(w.next_tensor(), i);
      w.write(b.data() + at, std::min<int64_t>(piece, static_cast<int64_t>(b.size() - at)));
    }
  }
  EXPECT_FALSE(w.next_tensor().has_value());
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// 40, 120, 40, 40 and 16 bytes; an empty tensor; a 2-byte one.
std::vector<OutputTensor> mixed() {
  return {{"a", Dtype::kF32, {10}}, {"b", Dtype::kF32, {6, 5}}, {"c", Dtype::kF32, {10}}, {"d", Dtype::kF32, {2, 5}},
          {"n", Dtype::kI64, {2}},  {"empty", Dtype::kF32, {0, 3}}, {"h", Dtype::kBF16, {}}};
}

const RoomFor kRoom{"the test model", ""};

TEST(ShardedWriter, OneFileWithTheMetadataAndEveryTensor) {
  const fs::path dir = fresh_dir("one");
  ShardPlan plan = plan_shards(mixed(), kDefaultMaxShardBytes);
  ASSERT_FALSE(plan.sharded());
  EXPECT_TRUE(plan.index.empty());
  ShardedWriter w(dir, plan, kRoom);
  feed(w, 7);   // pieces that straddle nothing but the tensor they start in
  const ShardedOutput out = w.finish();
  ASSERT_EQ(out.files, (std::vector<fs::path>{dir / "model.safetensors"}));
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(out.bytes_written, static_cast<int64_t>(fs::file_size(dir / "model.safetensors")));
  const ReadBack r = read_back(dir / "model.safetensors");
  EXPECT_EQ(r.header.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(r.header.tensors.size(), plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    EXPECT_EQ(r.tensor(plan.tensors[i].name), bytes_of(plan.tensors[i], i)) << plan.tensors[i].name;
    EXPECT_EQ(r.header.find(plan.tensors[i].name)->shape, plan.tensors[i].shape);
  }
  for (const auto& t : r.header.tensors) EXPECT_EQ((r.header.data_offset + t.begin) % dtype_size(t.dtype), 0) << t.name;
  fs::remove_all(dir);
}

TEST(ShardedWriter, PlanSplitsAsHuggingFaceHub) {
  // Shards of at most 100 bytes: b (120) is larger than a shard and gets one at once; a and c
  // share the next until d would tip it over; d, n, the empty tensor and h the last.
  const ShardPlan plan = plan_shards(mixed(), 100, "weights.safetensors");
  ASSERT_EQ(plan.shards.size(), 3u);
  EXPECT_EQ(plan.shards[0].file, "weights-00001-of-00003.safetensors");
  EXPECT_EQ(plan.shards[2].file, "weights-00003-of-00003.safetensors");
  EXPECT_EQ(plan.shards[0].tensors, (std::vector<size_t>{1}));
  EXPECT_EQ(plan.shards[1].tensors, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(plan.shards[2].tensors, (std::vector<size_t>{4, 3, 5, 6}));   // widest dtype first: I64, F32, BF16
  EXPECT_EQ(plan.total_tensor_bytes, 40 + 120 + 40 + 40 + 16 + 2);
  EXPECT_EQ(plan.index_name(), "weights.safetensors.index.json");
  EXPECT_EQ(plan.write_order(), (std::vector<size_t>{1, 0, 2, 4, 3, 5, 6}));
}

TEST(ShardedWriter, ShardsThenTheIndexLast) {
  const fs::path dir = fresh_dir("shards");
  ShardedWriter w(dir, plan_shards(mixed(), 100), kRoom);
  // Each shard is committed as soon as its last byte is in: the first before the rest is fed.
  const auto& plan = w.plan();
  const std::string first = bytes_of(plan.tensors[1], 1);
  w.write(first.data(), static_cast<int64_t>(first.size()));
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors.tmp"}));
  for (size_t i : plan.write_order()) {
    if (i == 1) continue;
    const std::string b = bytes_of(plan.tensors[i], i);
    w.write(b.data(), static_cast<int64_t>(b.size()));
  }
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));   // the index waits for finish()
  const ShardedOutput out = w.finish();
  ASSERT_EQ(out.files.size(), 4u);
  EXPECT_EQ(out.files.back(), dir / "model.safetensors.index.json");

  const auto index = nlohmann::json::parse(slurp(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], plan.total_tensor_bytes);
  std::map<std::string, std::string> where;
  int64_t bytes = 0;
  for (size_t s = 0; s < 3; ++s) {
    const ReadBack r = read_back(out.files[s]);
    EXPECT_EQ(r.header.metadata.at("format"), "pt");
    for (const auto& t : r.header.tensors) {
      where[t.name] = out.files[s].filename().string();
      bytes += t.nbytes();
      const size_t i = static_cast<size_t>(std::find_if(plan.tensors.begin(), plan.tensors.end(),
                                                        [&](const OutputTensor& o) { return o.name == t.name; }) -
                                           plan.tensors.begin());
      EXPECT_EQ(r.tensor(t.name), bytes_of(plan.tensors[i], i)) << t.name;
    }
  }
  EXPECT_EQ(bytes, plan.total_tensor_bytes);
  EXPECT_EQ(index["weight_map"].get<decltype(where)>(), where);
  EXPECT_EQ(where.size(), plan.tensors.size());
  fs::remove_all(dir);
}

TEST(ShardedWriter, TensorLargerThanAShardGetsItsOwn) {
  const fs::path dir = fresh_dir("large");
  std::vector<OutputTensor> tensors{{"small", Dtype::kF32, {2}}, {"huge", Dtype::kF32, {1000}}, {"tail", Dtype::kF32, {3}}};
  ShardedWriter w(dir, plan_shards(tensors, 64), kRoom);
  ASSERT_EQ(w.plan().shards.size(), 2u);   // the huge one first, then small and tail together
  EXPECT_EQ(w.plan().shards[0].tensors, (std::vector<size_t>{1}));
  EXPECT_EQ(w.plan().shards[1].tensors, (std::vector<size_t>{0, 2}));
  feed(w, 999);
  w.finish();
  const ReadBack huge = read_back(dir / "model-00001-of-00002.safetensors");
  ASSERT_EQ(huge.header.tensors.size(), 1u);
  EXPECT_EQ(huge.tensor("huge"), bytes_of(w.plan().tensors[1], 1));
  fs::remove_all(dir);
}

TEST(ShardedWriter, AFailurePartWayLeavesNoFile) {
  const fs::path dir = fresh_dir("failure");
  {
    ShardedWriter w(dir, plan_shards(mixed(), 100), kRoom);
    const auto order = w.plan().write_order();
    // The first shard whole and committed, then half of the second.
    for (size_t k = 0; k < 2; ++k) {
      const std::string b = bytes_of(w.plan().tensors[order[k]], order[k]);
      w.write(b.data(), static_cast<int64_t>(b.size()));
    }
    ASSERT_TRUE(fs::exists(dir / "model-00001-of-00003.safetensors"));
    // An error while writing (here a write that fails, as on a full disk).
    set_write_observer([](const fs::path&, int64_t) { throw IoError("the disk is full (ENOSPC)"); });
    const std::string b = bytes_of(w.plan().tensors[order[2]], order[2]);
    EXPECT_THROW(w.write(b.data(), static_cast<int64_t>(b.size())), IoError);
    set_write_observer(nullptr);
  }
  EXPECT_TRUE(listing(dir).empty()) << listing(dir).size();   // neither the committed shard nor a temporary
  // A piece that runs past its tensor, or finishing early, is the caller's bug.
  ShardedWriter w(dir, plan_shards(mixed(), kDefaultMaxShardBytes), kRoom);
  const std::string too_many(1000, 'x');
  EXPECT_THROW(w.write(too_many.data(), 1000), InternalError);
  EXPECT_THROW(w.finish(), InternalError);
  fs::remove_all(dir);
}

TEST(ShardedWriter, NoRoomWritesNothing) {
  const fs::path dir = fresh_dir("room");
  // More bytes than any disk has: refused before a file is opened.
  std::vector<OutputTensor> tensors{{"big", Dtype::kF64, {int64_t{1} << 58}}};
  try {
    ShardedWriter w(dir, plan_shards(tensors, kDefaultMaxShardBytes), kRoom);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not enough disk space for the test model"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(listing(dir).empty());
  fs::remove_all(dir);
}

TEST(ShardedWriter, AnEarlierSaveIsReplacedWithoutAMix) {
  const fs::path dir = fresh_dir("stale");
  fs::create_directories(dir);
  std::ofstream(dir / "model.safetensors") << "an earlier save";
  std::ofstream(dir / "model-00009-of-00009.safetensors") << "older still";
  std::ofstream(dir / "model.safetensors.index.json") << "{}";
  std::ofstream(dir / "config.json") << "{}";
  {
    ShardedWriter w(dir, plan_shards(mixed(), 100), kRoom);
    // Sharded: the old index goes before any shard is written.
    EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
    feed(w);
    const ShardedOutput out = w.finish();
    EXPECT_EQ(out.removed.size(), 3u);   // the index, model.safetensors, the ninth shard
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"config.json", "model-00001-of-00003.safetensors",
                                                    "model-00002-of-00003.safetensors",
                                                    "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  // One file again: the shards and the index go once it is in place.
  ShardedWriter w(dir, plan_shards(mixed(), kDefaultMaxShardBytes), kRoom);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  feed(w);
  EXPECT_EQ(w.finish().removed.size(), 4u);
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"config.json", "model.safetensors"}));
  fs::remove_all(dir);
}

TEST(ShardedWriter, PlanRefusesWhatCannotBeWritten) {
  EXPECT_THROW(plan_shards({{"a", Dtype::kF32, {1}}, {"a", Dtype::kF32, {1}}}, 100), UsageError);
  EXPECT_THROW(plan_shards({{"__metadata__", Dtype::kF32, {1}}}, 100), UsageError);
  EXPECT_THROW(plan_shards({{"", Dtype::kF32, {1}}}, 100), UsageError);
  EXPECT_THROW(plan_shards({{"a", Dtype::kF32, {-1}}}, 100), UsageError);
  EXPECT_THROW(plan_shards({}, 0), UsageError);
  EXPECT_THROW(plan_shards({}, 100, "model.bin"), UsageError);
  EXPECT_THROW(plan_shards({}, 100, "dir/model.safetensors"), UsageError);
  EXPECT_THROW(plan_shards({}, 100, ".safetensors"), UsageError);
  // No tensors at all: one empty file.
  EXPECT_EQ(plan_shards({}, 100).shards.size(), 1u);
}

TEST(ShardedWriter, OutputFileNames) {
  EXPECT_TRUE(is_output_file("model.safetensors", "model.safetensors"));
  EXPECT_TRUE(is_output_file("model.safetensors.index.json", "model.safetensors"));
  EXPECT_TRUE(is_output_file("model-00002-of-00010.safetensors", "model.safetensors"));
  EXPECT_TRUE(is_output_file("model-00002-of-00010.safetensors.tmp", "model.safetensors"));
  EXPECT_TRUE(is_output_file("pytorch_model-00001-of-00002.safetensors", "pytorch_model.safetensors"));
  EXPECT_FALSE(is_output_file("pytorch_model-00001-of-00002.safetensors", "model.safetensors"));
  EXPECT_FALSE(is_output_file("model-0002-of-00010.safetensors", "model.safetensors"));
  EXPECT_FALSE(is_output_file("config.json", "model.safetensors"));
}

}  // namespace
}  // namespace zerotrain::checkpoint
