// The checkpoint manifest's parser (checkpoint/manifest.h): a manifest round-trips, and an
// inconsistent one is refused with a CheckpointError naming the file and the field.
#include "zerotrain/checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <tuple>

#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

constexpr const char* kFile = "ckpt/global_step3/manifest.json";

Manifest valid_manifest() {
  Manifest m;
  m.tag = "global_step3";
  m.zerotrain_version = "0.1.0";
  m.world_size = 2;
  m.zero_stage = 2;
  m.model_dtype = "bf16";
  m.counters = {3, 72, 1, 6};
  m.optimizer = {{"type", "AdamW"}, {"params", {{"lr", 0.01}}}};
  m.optimizer_states = {"exp_avg", "exp_avg_sq"};
  m.lr_scheduler = {{"type", "WarmupLR"}, {"last_batch_iteration", 3}};
  m.rng_saved = true;
  m.groups = {{"decay", 0.01, 0.1, 3}};
  m.params = {{"fc.weight", {2, 4}, "bf16", 0, {{0, 0, 5}, {1, 5, 8}}}, {"fc.bias", {2}, "bf16", 0, {{1, 0, 2}}}};
  m.buffers = {{"steps", {}, "I64"}};
  m.frozen = {{"emb.weight", {3}, "BF16"}};
  m.files = {{0, "rank_00000.safetensors", 100, 0x0123456789abcdefULL, 7}, {1, "rank_00001.safetensors", 120, 1, 2}};
  m.ds_config = {{"train_batch_size", 24}};
  m.client_state = {{"epoch", 2}};
  return m;
}

// What parsing `json` says, or "accepted".
std::string problem(const Json& json) {
  try {
    manifest_from_json(json.dump(), kFile);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "accepted";
}

#define EXPECT_PROBLEM(json, needle)                                                   \
  do {                                                                                 \
    const std::string message = problem(json);                                         \
    EXPECT_NE(message.find(needle), std::string::npos) << message;                     \
    EXPECT_NE(message.find(kFile), std::string::npos) << "no file name: " << message;  \
  } while (0)

TEST(Manifest, RoundTrips) {
  const Manifest m = valid_manifest();
  const Manifest back = manifest_from_json(manifest_to_json(m).dump(1), kFile);
  EXPECT_EQ(manifest_to_json(back), manifest_to_json(m));
  ASSERT_EQ(back.params.size(), 2u);
  EXPECT_EQ(back.params[0].fragments.size(), 2u);
  EXPECT_EQ(back.params[0].fragments[1].rank, 1);
  EXPECT_EQ(back.params[0].fragments[1].begin, 5);
  EXPECT_EQ(back.files[0].checksum, 0x0123456789abcdefULL);
  EXPECT_EQ(back.counters.micro_steps, 6);
  EXPECT_EQ(fragment_key("fp32", "fc.weight", back.params[0].fragments[1]), "fp32/fc.weight[5:8]");
  EXPECT_EQ(rank_file_name(3), "rank_00003.safetensors");
}

// Providers' own per-rank tensors: absent when there are none (a manifest as version 1 was
// first written), kept when there are, refused when unknown, repeated or in a reserved name.
TEST(Manifest, RankTensorsRoundTripAndAreWrittenOnlyWhenThere) {
  Manifest m = valid_manifest();
  EXPECT_FALSE(manifest_to_json(m).contains("rank_tensors"));
  m.rank_tensors = {{"rng/cuda", "U8"}, {"counter/value", "F32"}};
  const Manifest back = manifest_from_json(manifest_to_json(m).dump(1), kFile);
  ASSERT_EQ(back.rank_tensors.size(), 2u);
  EXPECT_EQ(back.rank_tensors[1].name, "counter/value");
  EXPECT_EQ(back.rank_tensors[1].dtype, "F32");
  for (const auto& [name, dtype, needle] : {std::tuple{"rng/cuda", "Q9", "unknown dtype"},
                                            std::tuple{"rng/cpu", "U8", "a name the checkpoint's own tensors use"},
                                            std::tuple{"buffer/x", "U8", "a name the checkpoint's own tensors use"},
                                            std::tuple{"a[0:1]", "U8", "a name the checkpoint's own tensors use"}}) {
    Json j = manifest_to_json(valid_manifest());
    j["rank_tensors"] = Json::array({{{"name", name}, {"dtype", dtype}}});
    EXPECT_PROBLEM(j, needle);
  }
  Json twice = manifest_to_json(valid_manifest());
  twice["rank_tensors"] = Json::array({{{"name", "a/b"}, {"dtype", "U8"}}, {{"name", "a/b"}, {"dtype", "U8"}}});
  EXPECT_PROBLEM(twice, "repeated");
}

TEST(Manifest, FragmentsWithAGap) {
  Json j = manifest_to_json(valid_manifest());
  j["params"][0]["fragments"] = Json::array({Json::array({0, 0, 4}), Json::array({1, 5, 8})});
  EXPECT_PROBLEM(j, "parameter \"fc.weight\" has fragments that do not tile it in order (gap or overlap at element 4)");
}

TEST(Manifest, FragmentsThatOverlap) {
  Json j = manifest_to_json(valid_manifest());
  j["params"][0]["fragments"] = Json::array({Json::array({0, 0, 6}), Json::array({1, 5, 8})});
  EXPECT_PROBLEM(j, "gap or overlap at element 6");
}

TEST(Manifest, FragmentsThatDoNotCoverTheParameter) {
  Json j = manifest_to_json(valid_manifest());
  j["params"][0]["fragments"] = Json::array({Json::array({0, 0, 5})});
  EXPECT_PROBLEM(j, "has fragments covering 5 of its 8 elements");
}

TEST(Manifest, FragmentOnARankOutOfRange) {
  Json j = manifest_to_json(valid_manifest());
  j["params"][1]["fragments"] = Json::array({Json::array({2, 0, 2})});
  EXPECT_PROBLEM(j, "parameter \"fc.bias\" has a fragment on rank 2 of 2");
  j["params"][1]["fragments"] = Json::array({Json::array({-1, 0, 2})});
  EXPECT_PROBLEM(j, "has a fragment on rank -1 of 2");
}

TEST(Manifest, FragmentThatIsNotATriple) {
  Json j = manifest_to_json(valid_manifest());
  j["params"][1]["fragments"] = Json::array({Json::array({0, 0})});
  EXPECT_PROBLEM(j, "has a fragment that is not [rank, begin, end]");
}

TEST(Manifest, FileNameThatLeavesTheTagDirectory) {
  for (const char* name : {"../rank_00000.safetensors", "sub/rank_00000.safetensors", "/etc/passwd", "..", ""}) {
    Json j = manifest_to_json(valid_manifest());
    j["files"][0]["name"] = name;
    EXPECT_PROBLEM(j, "which is not a plain file name");
  }
}

TEST(Manifest, FormatVersionOtherThanOne) {
  Json j = manifest_to_json(valid_manifest());
  j["format_version"] = 2;
  EXPECT_PROBLEM(j, "checkpoint format version 2; this zerotrain reads version 1 (written by a newer zerotrain");
  j["format_version"] = 0;
  EXPECT_PROBLEM(j, "checkpoint format version 0; this zerotrain reads version 1");
  j["format_version"] = "1";
  EXPECT_PROBLEM(j, "\"format_version\" is not an integer");
}

TEST(Manifest, ForeignFormat) {
  Json j = manifest_to_json(valid_manifest());
  j["format"] = "deepspeed";
  EXPECT_PROBLEM(j, "it is not a zerotrain checkpoint");
  j.erase("format");
  EXPECT_PROBLEM(j, "it is not a zerotrain checkpoint");
}

TEST(Manifest, RankFilesMustMatchTheWorld) {
  Json j = manifest_to_json(valid_manifest());
  j["files"].erase(1);
  EXPECT_PROBLEM(j, "lists 1 rank files for a world of 2");
  j = manifest_to_json(valid_manifest());
  j["files"][1]["rank"] = 0;
  EXPECT_PROBLEM(j, "is out of rank order");
}

TEST(Manifest, FieldsOfTheWrongTypeOrRange) {
  Json j = manifest_to_json(valid_manifest());
  j["world_size"] = 0;
  EXPECT_PROBLEM(j, "\"world_size\" = 0 is out of range");
  j = manifest_to_json(valid_manifest());
  j["zero_stage"] = 4;
  EXPECT_PROBLEM(j, "\"zero_stage\" = 4 is out of range");
  j = manifest_to_json(valid_manifest());
  j["params"][0]["group"] = 1;
  EXPECT_PROBLEM(j, "\"group\" = 1 is out of range");
  j = manifest_to_json(valid_manifest());
  j["params"][1]["name"] = "fc.weight";
  EXPECT_PROBLEM(j, "parameter \"fc.weight\" appears twice");
  j = manifest_to_json(valid_manifest());
  j["params"][0]["shape"] = Json::array({4294967296LL, 4294967296LL});
  EXPECT_PROBLEM(j, "has a shape too large to address");
  j = manifest_to_json(valid_manifest());
  j["files"][0]["xxh3_64"] = "xyz";
  EXPECT_PROBLEM(j, "\"xxh3_64\" is not 16 hex digits");
  j = manifest_to_json(valid_manifest());
  j["optimizer_states"] = Json::array({"exp/avg"});
  EXPECT_PROBLEM(j, "optimizer state name that is not a plain name");
  j = manifest_to_json(valid_manifest());
  j["buffers"].push_back(j["buffers"][0]);
  EXPECT_PROBLEM(j, "\"steps\" appears twice");
}

TEST(Manifest, NotJsonOrNestedTooDeep) {
  try {
    manifest_from_json("{\"format\": ", kFile);
    ADD_FAILURE() << "accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON at line 1"), std::string::npos) << e.what();
  }
  Json j = manifest_to_json(valid_manifest());
  Json deep = 1;
  for (int i = 0; i < 100; ++i) deep = Json::array({deep});
  j["client_state"] = deep;
  EXPECT_PROBLEM(j, "nested deeper than 64 levels");
}

}  // namespace
}  // namespace zerotrain::checkpoint
