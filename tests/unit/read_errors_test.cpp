// What a user reads when a file cannot be read (core/input_file.h) and how every error
// message shows the text it quotes (core/escape.h, applied by zerotrain::Error).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "zerotrain/core/error.h"
#include "zerotrain/core/escape.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using files::InputFile;
using files::ReadError;

#define EXPECT_HAS(text, needle) EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

// /proc/self/mem is a regular file whose first page is never mapped: reading it from byte 0
// fails with EIO, a real failed read without root or a broken disk.
constexpr const char* kEioFile = "/proc/self/mem";

ReadError read_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ReadError& e) {
    return e;
  }
  ADD_FAILURE() << "no files::ReadError thrown";
  return ReadError("?", "?", 0);
}

class ReadFiles : public ::testing::Test {
 public:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("zt_read_" + std::string(test->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

 protected:
  fs::path dir_;
};

// ------------------------------------------------------------------------------------------
// Error messages escape what they quote

TEST(ErrorText, NulAndEscapeAreShownNotActedOn) {
  const ConfigError e("unknown key \"a\0b\x1b[31mred\x1b[0m\" in cfg.json"s);
  const std::string what = e.what();   // a C string: a raw NUL would end it
  EXPECT_HAS(what, "[config] unknown key \"a\\x00b\\x1b[31mred\\x1b[0m\" in cfg.json");
  EXPECT_EQ(what.find('\0'), std::string::npos);
  EXPECT_EQ(what.find('\x1b'), std::string::npos);
  EXPECT_EQ(e.message(), "unknown key \"a\\x00b\\x1b[31mred\\x1b[0m\" in cfg.json");
}

TEST(ErrorText, EveryErrorTypeEscapes) {
  const std::string raw("x\0y\rz\x07", 6);
  const std::string shown = "x\\x00y\\x0dz\\x07";
  EXPECT_HAS(UsageError(raw).what(), shown);
  EXPECT_HAS(IoError(raw).what(), shown);
  EXPECT_HAS(CheckpointError(raw).what(), shown);
  EXPECT_HAS(CommError(raw).what(), shown);
  EXPECT_HAS(InternalError(raw).what(), shown);
  EXPECT_HAS(Error("libtorch", raw).what(), shown);
  EXPECT_HAS(ReadError(raw, "no such file", ENOENT).what(), shown + ": no such file");
}

TEST(ErrorText, LayoutAndValidUtf8Stay) {
  EXPECT_EQ(UsageError("line one\n\tline two: caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80").message(),
            "line one\n\tline two: caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");
}

TEST(ErrorText, InvalidUtf8AndHiddenControlsAreEscaped) {
  using strings::escape_for_display;
  EXPECT_EQ(escape_for_display("a\xff" "b\xc3"), "a\\xffb\\xc3");             // stray byte, cut sequence
  EXPECT_EQ(escape_for_display("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(escape_for_display("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(escape_for_display("\xc2\x9b" "31m"), "\\u009b31m");             // C1 CSI
  EXPECT_EQ(escape_for_display("abc\xe2\x80\xae" "txt.exe"), "abc\\u202etxt.exe");   // right-to-left override
  EXPECT_EQ(escape_for_display("\x7f"), "\\x7f");
  // Escaping twice changes nothing: an error built from another's message stays readable.
  const std::string once = escape_for_display(std::string("p\0\x1b\xff\xc2\x9b", 6));
  EXPECT_EQ(escape_for_display(once), once);
  EXPECT_EQ(UsageError(IoError(std::string("q\0r", 3)).message()).message(), "q\\x00r");
}

// ------------------------------------------------------------------------------------------
// Reading a file

TEST_F(ReadFiles, ReadsWholeFile) {
  const fs::path path = write("a.txt", "hello\nworld");
  InputFile file(path);
  EXPECT_EQ(file.size(), 11);
  EXPECT_EQ(file.read_all(), "hello\nworld");
  char head[5];
  file.read_at(0, head, 5);
  EXPECT_EQ(std::string(head, 5), "hello");
}

TEST_F(ReadFiles, FailedReadIsAnIoErrorNamingFileAndErrno) {
  InputFile file(kEioFile);
  const ReadError e = read_error_of([&] { file.read_all(); });
  EXPECT_EQ(e.error_number(), EIO);
  EXPECT_EQ(e.exit_code(), 7);
  EXPECT_HAS(e.what(), std::string("[io] ") + kEioFile + ": cannot be read at byte 0: Input/output error (EIO)");
  char byte;
  EXPECT_HAS(read_error_of([&] { file.read_at(0, &byte, 1); }).what(), "Input/output error (EIO)");
  // The readers that return a problem instead (configs, hostfiles, manifests) say the same.
  const files::TextFile text = files::read_text_file(kEioFile, {.what = "config file"});
  EXPECT_FALSE(text.text.has_value());
  EXPECT_HAS(text.problem, "cannot be read at byte 0: Input/output error (EIO)");
}

TEST_F(ReadFiles, WhatIsNotARegularFileIsNamed) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);   // not waited on
  const std::pair<fs::path, std::string> cases[] = {
      {dir_, "is a directory; give the path of a text file"},
      {dir_ / "fifo", "is a FIFO (named pipe); give the path of a text file"},
      {"/dev/zero", "is a character device; give the path of a text file"},
      {dir_ / "absent", "no such file"},
      {dir_ / "absent" / "x", "no such file"},
  };
  for (const auto& [path, problem] : cases) {
    const ReadError e = read_error_of([&] { InputFile(path, {.what = "text file"}); });
    EXPECT_EQ(e.problem(), problem);
    EXPECT_HAS(e.what(), path.string() + ": " + problem);
  }
}

TEST_F(ReadFiles, FileThatShrinksWhileReadIsNamed) {
  const fs::path path = write("shrinks.bin", std::string(4096, 'x'));
  InputFile file(path);
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);   // after its size was taken, before the read
  std::string out(4096, '\0');
  const ReadError e = read_error_of([&] { file.read_at(0, out.data(), 4096); });
  EXPECT_HAS(e.what(), path.string() + ": ended at byte 1000 while bytes 0..4096 were read, though it was 4096 bytes");
  EXPECT_HAS(e.what(), "shrank while being read");
  // Read to the end, the file is what it holds now.
  EXPECT_EQ(InputFile(path).read_all().size(), 1000u);
}

TEST_F(ReadFiles, ReadAllStopsPastTheLimit) {
  const fs::path path = write("big.txt", std::string(5000, 'x'));
  EXPECT_EQ(InputFile(path).read_all(100).size(), 101u);
  EXPECT_HAS(files::read_text_file(path, {.what = "hostfile", .max_bytes = 100}).problem,
             "is 5000 bytes, more than the 100 bytes a hostfile may have");
}

TEST_F(ReadFiles, ControlCharactersInAPathAreEscapedInTheMessage) {
  const fs::path path = dir_ / "a\x1b[2Jb\nc";
  const ReadError e = read_error_of([&] { InputFile file(path); });
  EXPECT_HAS(e.what(), "a\\x1b[2Jb\nc: no such file");
  EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace zerotrain
