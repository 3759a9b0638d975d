// The output policy (zerotrain/core/output_path.h) and the writers that go through it: a
// FIFO, a device, a socket, a folder, a link or an input of the run where a file is written
// is refused at once without being opened or changed; an existing file is not truncated
// unless allowed; zerotrain's own folders are never links, and a refusal leaves none behind.
#include "zerotrain/core/output_path.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/output_file.h"
#include "zerotrain/monitor/append_file.h"

namespace zerotrain::files {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir;
  Scratch() {
    char name[] = "/tmp/zt_output_path_XXXXXX";
    dir = ::mkdtemp(name);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
    clear_inputs();
  }
};

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The message of the Error `fn` throws, which must be an `E`.
template <class E, class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was refused";
  return "";
}

// Every writer of the project, by the way it opens its file.
void open_each_way(const fs::path& path) {
  for (const OpenMode mode : {OpenMode::kTruncate, OpenMode::kAppend, OpenMode::kCreateNew}) {
    const std::string message = error_of<IoError>([&] { ::close(open_output_file(path, mode, {.what = "--out"})); });
    EXPECT_TRUE(has(message, "--out " + path.string())) << message;
  }
}

TEST(OutputPath, AFifoIsRefusedAtOnceWithoutWaitingForAReader) {
  Scratch s;
  const fs::path fifo = s.dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto started = std::chrono::steady_clock::now();
  open_each_way(fifo);
  const std::string message = error_of<IoError>([&] { OutputFile file(fifo, {.what = "--metrics_file"}); });
  EXPECT_TRUE(has(message, "is a FIFO (named pipe); give the path of a regular file")) << message;
  EXPECT_THROW(monitor::AppendFile file(fifo), IoError);
  EXPECT_THROW(checkpoint::AtomicFile file(fifo), IoError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(OutputPath, DevicesFoldersAndSocketsAreRefused) {
  Scratch s;
  open_each_way("/dev/null");
  EXPECT_TRUE(has(error_of<IoError>([] { check_output_file("/dev/full"); }), "is a character device"));
  EXPECT_TRUE(has(error_of<IoError>([&] { OutputFile file(s.dir, {.what = "--metrics_file"}); }), "is a directory"));
  EXPECT_THROW(checkpoint::AtomicFile file(s.dir), IoError);
  const fs::path socket_path = s.dir / "socket";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  EXPECT_TRUE(has(error_of<IoError>([&] { check_output_file(socket_path); }), "is a socket"));
  ::close(fd);
}

TEST(OutputPath, ALinkIsNeitherFollowedNorReplaced) {
  Scratch s;
  write(s.dir / "elsewhere", "precious");
  fs::create_symlink(s.dir / "elsewhere", s.dir / "link");
  fs::create_symlink(s.dir / "nothing_yet", s.dir / "dangling");
  for (const char* name : {"link", "dangling"}) {
    open_each_way(s.dir / name);
    const std::string message = error_of<IoError>([&] { OutputFile file(s.dir / name, {.what = "--metrics_file"}); });
    EXPECT_TRUE(has(message, "is a symbolic link")) << message;
    EXPECT_THROW(checkpoint::AtomicFile file(s.dir / name), IoError);
    EXPECT_TRUE(fs::is_symlink(s.dir / name));
  }
  EXPECT_EQ(read(s.dir / "elsewhere"), "precious");
  EXPECT_FALSE(fs::exists(s.dir / "nothing_yet"));
}

TEST(OutputPath, AnInputOfTheRunIsRefusedUnderAnyName) {
  Scratch s;
  write(s.dir / "ds_config.json", "{}");
  fs::create_hard_link(s.dir / "ds_config.json", s.dir / "hard_link.json");
  fs::create_directories(s.dir / "data");
  write(s.dir / "data" / "train.bin", "data");
  register_input(s.dir / "ds_config.json", "config file");
  register_input(s.dir / "data", "dataset file");
  for (const fs::path& target : {s.dir / "ds_config.json", s.dir / "hard_link.json", s.dir / "data" / "train.bin"}) {
    const std::string message =
        error_of<IoError>([&] { OutputFile file(target, {.what = "--metrics_file", .may_replace = true}); });
    EXPECT_TRUE(has(message, "this run's")) << message;
    EXPECT_THROW(monitor::AppendFile file(target), IoError);
    EXPECT_THROW(checkpoint::AtomicFile file(target), IoError);
  }
  EXPECT_TRUE(has(error_of<IoError>([&] { check_output_file(s.dir / "hard_link.json"); }),
                  "this run's config file " + (s.dir / "ds_config.json").string()));
  EXPECT_EQ(read(s.dir / "ds_config.json"), "{}");
  EXPECT_EQ(read(s.dir / "data" / "train.bin"), "data");
}

TEST(OutputPath, AnExistingFileIsTruncatedOnlyWhenAllowed) {
  Scratch s;
  const fs::path path = s.dir / "metrics.jsonl";
  write(path, "{\"step\": 1}\n");
  const std::string message = error_of<UsageError>([&] {
    OutputFile file(path, {.what = "--metrics_file", .may_replace = false, .replace_hint = "add --overwrite_output_dir"});
  });
  EXPECT_TRUE(has(message, "--metrics_file " + path.string() + " already exists (12 bytes)")) << message;
  EXPECT_TRUE(has(message, "add --overwrite_output_dir")) << message;
  EXPECT_EQ(read(path), "{\"step\": 1}\n");
  {
    // Appending loses nothing: allowed.
    monitor::AppendFile file(path);
    file.write("more\n");
  }
  EXPECT_EQ(read(path), "{\"step\": 1}\nmore\n");
  {
    OutputFile file(path, {.what = "--metrics_file", .may_replace = true});
    file.write("new\n");
    file.close();
  }
  EXPECT_EQ(read(path), "new\n");
  write(path, "");   // an empty file (mktemp's) holds nothing to lose
  OutputFile empty(path, {.what = "--metrics_file", .may_replace = false});
  empty.close();
}

TEST(OutputPath, OwnFoldersAreMadeOnlyWhereNoLinkIsAndRemovedOnRefusal) {
  Scratch s;
  EXPECT_EQ(make_own_directories(s.dir, {"a", "b"}, "folder"), s.dir / "a" / "b");
  EXPECT_TRUE(fs::is_directory(s.dir / "a" / "b"));
  EXPECT_EQ(make_own_directories(s.dir, {"a", "b"}, "folder"), s.dir / "a" / "b");   // there already: fine

  fs::create_directories(s.dir / "elsewhere");
  fs::create_directory_symlink(s.dir / "elsewhere", s.dir / "x");
  std::string message = error_of<IoError>([&] { make_own_directories(s.dir, {"x", "y"}, "checkpoint folder"); });
  EXPECT_TRUE(has(message, "checkpoint folder " + (s.dir / "x").string() + " is a symbolic link")) << message;
  EXPECT_TRUE(fs::is_empty(s.dir / "elsewhere"));

  // A file where a folder goes is refused; a refusal deeper down removes what this call made
  // ("new" is made, then the walk comes back up through ".." to the file).
  fs::create_directories(s.dir / "p");
  write(s.dir / "p" / "file", "");
  message = error_of<IoError>([&] { make_own_directories(s.dir / "p", {"file", "z"}, "folder"); });
  EXPECT_TRUE(has(message, "is a regular file, not a folder")) << message;
  message = error_of<IoError>([&] { make_own_directories(s.dir, {"new", "..", "p", "file"}, "folder"); });
  EXPECT_TRUE(has(message, "not a folder")) << message;
  EXPECT_FALSE(fs::exists(s.dir / "new"));
}

TEST(OutputPath, ARootForBulkDataIsNeverCreated) {
  Scratch s;
  for (const fs::path& root : {s.dir / "missing", s.dir / "missing" / "nested" / "deeper"}) {
    const std::string message = error_of<IoError>([&] { make_own_directories(root, {"zerotrain_offload"}, "nvme_path"); });
    EXPECT_TRUE(has(message, "nvme_path " + root.string() + " does not exist; create it or fix the path (is the disk mounted?)"))
        << message;
  }
  write(s.dir / "file", "");
  EXPECT_TRUE(has(error_of<IoError>([&] { check_existing_root(s.dir / "file", "nvme_path"); }), "not a folder"));
  EXPECT_TRUE(has(error_of<IoError>([&] { check_existing_root(s.dir / "file" / "sub", "nvme_path"); }), "does not exist"));
  EXPECT_FALSE(fs::exists(s.dir / "missing"));
}

}  // namespace
}  // namespace zerotrain::files
