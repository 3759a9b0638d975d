#include "zerotrain/config/json_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

TEST(JsonText, AcceptsCommentsAndTrailingCommasLikeHjson) {
  Json j = parse_json_text(R"({
    // a line comment
    "a": 1, /* a block comment */
    "b": [1, 2, 3,],
    "c": {"d": "x,}", "e": true,},
  })");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"].size(), 3u);
  EXPECT_EQ(j["c"]["d"], "x,}");   // commas inside strings are data
  EXPECT_EQ(j["c"]["e"], true);
}

TEST(JsonText, KeepsKeyOrder) {
  Json j = parse_json_text(R"({"z": 1, "a": 2, "m": 3})");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
}

TEST(JsonText, DuplicateKeysAreErrorsNamingEachPath) {
  std::string msg = message_of([] {
    parse_json_text(R"({"a": 1, "z": {"stage": 1, "stage": 2}, "a": 3, "l": [{"k": 1, "k": 2}]})", "cfg.json");
  });
  EXPECT_NE(msg.find("cfg.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate keys"), std::string::npos) << msg;
  EXPECT_NE(msg.find("z.stage"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" a"), std::string::npos) << msg;
  EXPECT_NE(msg.find("l[0].k"), std::string::npos) << msg;
}

TEST(JsonText, SyntaxErrorsNameLineAndColumn) {
  std::string msg = message_of([] { parse_json_text("{\n  \"a\": 1\n  \"b\": 2\n}", "cfg.json"); });
  EXPECT_NE(msg.find("cfg.json: invalid JSON at line 3"), std::string::npos) << msg;
}

TEST(JsonText, MissingFileIsAConfigError) {
  std::string msg = message_of([] { read_json_file("/nonexistent/ds_config.json"); });
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST(JsonText, ReadsAFile) {
  auto path = std::filesystem::temp_directory_path() / "zerotrain_json_text_test.json";
  std::ofstream(path) << "{\"train_batch_size\": 8, // comment\n}";
  EXPECT_EQ(read_json_file(path)["train_batch_size"], 8);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace zerotrain::config
