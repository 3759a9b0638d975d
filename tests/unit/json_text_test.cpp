#include "zerotrain/config/json_text.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

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

// A binary file's bytes reach the terminal escaped, and nlohmann's tags stay out.
TEST(JsonText, MessagesAboutBinaryInputArePrintable) {
  const std::string msg = message_of([] { parse_json_text(std::string("\x1b[2J\x01\xff", 6), "bin.json"); });
  EXPECT_NE(msg.find("bin.json: invalid JSON at line 1"), std::string::npos) << msg;
  for (char c : msg) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "byte " << int(c) << " in " << msg;
  const std::string overflow = message_of([] { parse_json_text(R"({"a": 1e400})", "big.json"); });
  EXPECT_NE(overflow.find("big.json: invalid JSON at line 1, column"), std::string::npos) << overflow;
  EXPECT_NE(overflow.find("number overflow"), std::string::npos) << overflow;
  EXPECT_EQ(overflow.find("json.exception"), std::string::npos) << overflow;
}

// Everything that walks a Json recurses once per level; 50,000 levels once overflowed the stack.
TEST(JsonText, DeepNestingIsAnErrorNotACrash) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    std::string text;
    for (int i = 0; i < 50'000; ++i) text += open;
    text += "1";
    for (int i = 0; i < 50'000; ++i) text += close;
    const std::string msg = message_of([&] { parse_json_text(text, "deep.json"); });
    EXPECT_NE(msg.find("deep.json: nested deeper than 64 levels"), std::string::npos) << msg.substr(0, 200);
  }
  std::string ok;   // the bound itself is accepted
  for (size_t i = 0; i < kMaxJsonDepth; ++i) ok += "[";
  for (size_t i = 0; i < kMaxJsonDepth; ++i) ok += "]";
  EXPECT_NO_THROW(parse_json_text(ok));
}

TEST(JsonText, OversizedTextIsRefused) {
  const std::string text = "{\"a\": \"" + std::string(kMaxJsonBytes, 'x') + "\"}";
  EXPECT_NE(message_of([&] { parse_json_text(text, "big.json"); }).find("more than the"), std::string::npos);
  auto path = std::filesystem::temp_directory_path() / ("zerotrain_json_text_big_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << text;
  const std::string msg = message_of([&] { read_json_file(path); });
  EXPECT_NE(msg.find("is it the right file?"), std::string::npos) << msg;
  std::filesystem::remove(path);
}

// Whatever the path is, the read ends at once and says what it is; a FIFO is not waited on.
TEST(JsonText, NonRegularFilesAreRefusedByWhatTheyAre) {
  const auto dir = std::filesystem::temp_directory_path() / ("zerotrain_json_text_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "loop_b", dir / "loop_a");
  std::filesystem::create_symlink(dir / "loop_a", dir / "loop_b");
  const std::pair<std::filesystem::path, std::string> cases[] = {
      {dir, "is a directory"},
      {dir / "fifo", "is a FIFO (named pipe)"},
      {"/dev/zero", "is a character device"},
      {dir / "loop_a", "is a symlink loop"},
      {dir / "missing.json", "no such file"},
  };
  for (const auto& [path, expected] : cases) {
    const std::string msg = message_of([&] { read_json_file(path); });
    EXPECT_NE(msg.find(path.string() + ": cannot read the config file: " + expected), std::string::npos) << msg;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zerotrain::config
