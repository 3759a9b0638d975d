// One JSON reading policy (core/json_reader.h): a ds_config, a checkpoint manifest and a
// safetensors header refuse the same hostile text the same way, each with its own error type
// and its file named. Before, a manifest with a key given twice was read (the last one won)
// while a ds_config's was refused.
#include "zerotrain/core/json_reader.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/config/json_text.h"
#include "zerotrain/core/error.h"

namespace zerotrain {
namespace {

// What `read` throws (its message), or "accepted".
std::string verdict(const std::function<void()>& read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// A valid manifest's text, as the writer makes it.
std::string manifest_text() {
  checkpoint::Manifest m;
  m.tag = "global_step3";
  m.zerotrain_version = "0.1.0";
  m.world_size = 1;
  m.groups = {{"decay", 0.01, 0.1, 3}};
  m.params = {{"fc.weight", {2, 4}, "fp32", 0, {{0, 0, 8}}}};
  m.files = {{0, "rank_00000.safetensors", 100, 1, 2}};
  m.ds_config = {{"train_batch_size", 8}};
  m.client_state = checkpoint::Json::object();
  return checkpoint::manifest_to_json(m).dump();
}

const std::string kEntry = R"("a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";

struct Reader {
  const char* name;
  std::function<void(const std::string&)> read;
  std::string valid;   // text it accepts
};

std::vector<Reader> readers() {
  return {
      {"ds_config", [](const std::string& t) { config::parse_json_text(t, "ds.json"); }, R"({"train_batch_size": 8})"},
      {"manifest", [](const std::string& t) { checkpoint::manifest_from_json(t, "manifest.json"); }, manifest_text()},
      {"safetensors header", [](const std::string& t) {
         checkpoint::parse_safetensors_header(t, 8 + static_cast<int64_t>(t.size()) + 4, "rank.safetensors");
       },
       "{" + kEntry + "}"},
  };
}

TEST(JsonPolicy, EveryReaderAcceptsItsValidText) {
  for (const Reader& r : readers()) EXPECT_EQ(verdict([&] { r.read(r.valid); }), "accepted") << r.name;
}

// A key given twice at the top, in a nested object and in an object inside an array.
TEST(JsonPolicy, DuplicateKeysAreRefusedByEveryReader) {
  for (const Reader& r : readers()) {
    const std::string& v = r.valid;
    const std::vector<std::string> forged = {
        "{\"zz\": 1, \"zz\": 2, " + v.substr(1),                       // a new key, twice
        v.substr(0, v.size() - 1) + ", \"" + v.substr(2, v.find('"', 2) - 2) + "\": 1}",   // its first key again
    };
    for (const std::string& text : forged) {
      const std::string message = verdict([&] { r.read(text); });
      EXPECT_NE(message.find("duplicate keys"), std::string::npos) << r.name << ": " << message << "\n  " << text;
    }
  }
  // Nested: a manifest parameter's dtype given twice (the last would win), a safetensors
  // entry's dtype, a ds_config block's key.
  std::string manifest = manifest_text();
  manifest.insert(manifest.find("\"dtype\":\"fp32\"") + 1, "dtype\":\"bf16\",\"");
  EXPECT_NE(verdict([&] { checkpoint::manifest_from_json(manifest, "manifest.json"); }).find("params[0].dtype"),
            std::string::npos)
      << manifest;
  const std::string header = R"({"a": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})";
  EXPECT_NE(verdict([&] { readers()[2].read(header); }).find("a.dtype"), std::string::npos);
  EXPECT_NE(verdict([&] { config::parse_json_text(R"({"fp16": {"enabled": true, "enabled": false}})", "ds.json"); })
                .find("fp16.enabled"),
            std::string::npos);
}

TEST(JsonPolicy, OverflowingNumbersAreRefusedByEveryReader) {
  for (const Reader& r : readers()) {
    const std::string text = "{\"zz\": 1e999, " + r.valid.substr(1);
    const std::string message = verdict([&] { r.read(text); });
    EXPECT_NE(message.find("number overflow"), std::string::npos) << r.name << ": " << message;
  }
}

TEST(JsonPolicy, DeepNestingIsRefusedByEveryReader) {
  for (const Reader& r : readers()) {
    const std::string text = "{\"zz\": " + std::string(100'000, '[') + std::string(100'000, ']') + ", " + r.valid.substr(1);
    const std::string message = verdict([&] { r.read(text); });
    EXPECT_NE(message.find("nested deeper than"), std::string::npos) << r.name << ": " << message.substr(0, 300);
  }
}

TEST(JsonPolicy, TrailingTextAndBadUtf8AreRefusedByEveryReader) {
  for (const Reader& r : readers()) {
    EXPECT_NE(verdict([&] { r.read(r.valid + " {}"); }).find("invalid JSON"), std::string::npos) << r.name;
    const std::string bad_utf8 = "{\"z\xff\": 1, " + r.valid.substr(1);
    const std::string message = verdict([&] { r.read(bad_utf8); });
    EXPECT_NE(message.find("invalid JSON"), std::string::npos) << r.name << ": " << message;
    for (char c : message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r.name << ": byte " << int(c) << " in " << message;
  }
}

// Comments and trailing commas are DeepSpeed's hjson, for a ds_config only: a file zerotrain
// wrote never has them, and the safetensors format has none.
TEST(JsonPolicy, CommentsOnlyInADsConfig) {
  const std::vector<Reader> all = readers();
  EXPECT_EQ(verdict([&] { all[0].read("{// c\n" + all[0].valid.substr(1)); }), "accepted");
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_NE(verdict([&] { all[i].read("{/* c */" + all[i].valid.substr(1)); }).find("invalid JSON"),
              std::string::npos)
        << all[i].name;
  }
}

// Many keys in one object cost linear time, not a scan per key (a hostile header of a
// million tensors once took minutes to be refused).
TEST(JsonPolicy, ManyKeysAreReadInLinearTime) {
  std::string text = "{";
  for (int i = 0; i < 200'000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  text += ",\"k7\":2}";
  const json::ReadResult r = json::read_json_text(text, {.max_bytes = 1 << 30});
  EXPECT_NE(r.problem.find("duplicate keys (JSON keeps only one of each; remove the extra): k7"), std::string::npos)
      << r.problem;
  text.replace(text.rfind(",\"k7\":2"), 7, "");
  const json::ReadResult ok = json::read_json_text(text, {.max_bytes = 1 << 30});
  ASSERT_TRUE(ok.ok()) << ok.problem;
  EXPECT_EQ(ok.value.size(), 200'000u);
  EXPECT_EQ(ok.value.begin().key(), "k0");   // the text's order
}

}  // namespace
}  // namespace zerotrain
