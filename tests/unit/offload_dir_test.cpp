// NVMe offload's folders (zerotrain/io/offload_dir.h): nvme_path is never created, a path on
// tmpfs is refused before anything is made in it, and zerotrain's own folders are made below.
#include "zerotrain/io/offload_dir.h"

#include <gtest/gtest.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::io {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& nvme_path) {
  try {
    make_offload_dir(nvme_path, {"zerotrain_offload", "optimizer", "rank0"}, "offload_optimizer.nvme_path");
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << nvme_path << " was accepted";
  return "";
}

struct Scratch {
  fs::path dir = fs::path(ZEROTRAIN_IO_TEST_DIR) / ("offload_dir_" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

TEST(OffloadDir, MakesZerotrainsFoldersInAnExistingNvmePath) {
  Scratch s;
  const std::string made = make_offload_dir(s.dir.string(), {"zerotrain_offload", "params", "rank1"}, "nvme_path");
  EXPECT_EQ(made, (s.dir / "zerotrain_offload" / "params" / "rank1").string());
  EXPECT_TRUE(fs::is_directory(made));
}

TEST(OffloadDir, AMissingNvmePathIsNotCreated) {
  Scratch s;
  for (const fs::path& missing : {s.dir / "typo", s.dir / "unmounted" / "nvme" / "swap"}) {
    const std::string message = error_of(missing.string());
    EXPECT_NE(message.find("offload_optimizer.nvme_path " + missing.string() +
                           " does not exist; create it or fix the path (is the disk mounted?)"),
              std::string::npos)
        << message;
  }
  EXPECT_TRUE(fs::is_empty(s.dir));
}

TEST(OffloadDir, TmpfsIsRefusedAndNothingIsLeftInIt) {
  struct statfs st {};
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != TMPFS_MAGIC) GTEST_SKIP() << "no tmpfs at /dev/shm";
  const fs::path dir = fs::path("/dev/shm") / ("zt_offload_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string message = error_of(dir.string());
  EXPECT_NE(message.find("is on tmpfs, which is memory, not a disk"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(dir)) << "the refusal left folders in " << dir;
  fs::remove_all(dir);
}

TEST(OffloadDir, ALinkWhereZerotrainMakesAFolderIsRefused) {
  Scratch s;
  fs::create_directories(s.dir / "elsewhere");
  fs::create_directory_symlink(s.dir / "elsewhere", s.dir / "zerotrain_offload");
  const std::string message = error_of(s.dir.string());
  EXPECT_NE(message.find("is a symbolic link"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(s.dir / "elsewhere"));
}

}  // namespace
}  // namespace zerotrain::io
