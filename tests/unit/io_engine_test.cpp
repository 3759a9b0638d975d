// The asynchronous IO engines (zerotrain/io/io_engine.h): every engine that runs here passes
// the same round trips and faults; an engine this build lacks or this kernel refuses is
// skipped with the reason probe_engines() gives.
#include "zerotrain/io/io_engine.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/config/config.h"
#include "zerotrain/config/schema_zero.h"
#include "zerotrain/core/error.h"
#include "zerotrain/io/engine_common.h"
#include "zerotrain/io/from_config.h"

namespace zerotrain::io {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBlock = 64 << 10;   // small pieces, so that a few hundred KiB make many

// A fresh directory on the build's disk (not /tmp, which may be tmpfs), removed afterwards.
class TempDir {
 public:
  TempDir() {
    fs::create_directories(ZEROTRAIN_IO_TEST_DIR);
    std::string pattern = std::string(ZEROTRAIN_IO_TEST_DIR) + "/io_test_XXXXXX";
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

AlignedBuffer random_bytes(int64_t nbytes, uint32_t seed) {
  AlignedBuffer b(nbytes);
  std::mt19937 gen(seed);
  auto* words = static_cast<uint32_t*>(b.data());
  for (int64_t i = 0; i < b.nbytes() / 4; ++i) words[i] = gen();
  return b;
}

bool same_bytes(const AlignedBuffer& a, const AlignedBuffer& b, int64_t nbytes) {
  return std::memcmp(a.data(), b.data(), static_cast<size_t>(nbytes)) == 0;
}

// The IoError message of `fn`, or "no error".
template <class Fn>
std::string io_error(Fn&& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  }
  return "no error";
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

class IoEngineTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    for (const EngineProbe& p : probe_engines()) {
      if (p.kind == GetParam() && !p.available) GTEST_SKIP() << engine_kind_name(p.kind) << ": " << p.detail;
    }
  }
  AioOptions options(int64_t queue_depth = 4, int64_t threads = 2) const {
    AioOptions o;
    o.block_size_bytes = kBlock;
    o.queue_depth = queue_depth;
    o.threads = threads;
    o.engine = GetParam();
    return o;
  }
  // Writes `nbytes` of random bytes at `offset`, reads them back, compares.
  void round_trip(IoEngine& engine, const DirectFile& file, int64_t offset, int64_t nbytes, uint32_t seed) {
    AlignedBuffer out = random_bytes(nbytes, seed);
    AlignedBuffer in(nbytes);
    engine.wait(engine.submit({&file, offset, out.data(), nbytes, true}));
    engine.wait(engine.submit({&file, offset, in.data(), nbytes, false}));
    EXPECT_TRUE(same_bytes(out, in, nbytes)) << nbytes << " bytes at offset " << offset;
  }
  TempDir dir_;
};

TEST_P(IoEngineTest, MakesTheEngineAskedFor) {
  auto engine = make_io_engine(options());
  EXPECT_EQ(engine->kind(), GetParam());
  EXPECT_STREQ(engine->name(), engine_kind_name(GetParam()));
}

TEST_P(IoEngineTest, RoundTripsManySizes) {
  auto engine = make_io_engine(options());
  DirectFile file = DirectFile::open(dir_.file("data"), DirectFile::Mode::kCreate);
  const std::vector<int64_t> sizes = {
      kAlignmentBytes,              // less than a block
      kBlock,                       // one block
      5 * kBlock,                   // a few blocks
      40 * kBlock,                  // more pieces than queue_depth x threads
      3 * kBlock + 5 * kAlignmentBytes,   // a multiple of 4096 but not of the block size
  };
  int64_t offset = 0;
  uint32_t seed = 1;
  for (int64_t n : sizes) {
    round_trip(*engine, file, offset, n, seed++);
    offset += n + kAlignmentBytes;   // leave holes: the offsets need not be block-aligned
  }
  EXPECT_EQ(file.size_bytes(), offset - kAlignmentBytes);
  // A request of no bytes is done at once.
  engine->wait(engine->submit({&file, 0, nullptr, 0, false}));
}

TEST_P(IoEngineTest, EverySubmitMode) {
  DirectFile file = DirectFile::open(dir_.file("data"), DirectFile::Mode::kCreate);
  uint32_t seed = 10;
  for (bool single_submit : {false, true}) {
    for (bool overlap_events : {false, true}) {
      AioOptions o = options(3, 1);
      o.single_submit = single_submit;
      o.overlap_events = overlap_events;
      auto engine = make_io_engine(o);
      round_trip(*engine, file, 0, 11 * kBlock + kAlignmentBytes, seed++);
    }
  }
}

TEST_P(IoEngineTest, ConcurrentTicketsWaitedInAnyOrder) {
  auto engine = make_io_engine(options());
  DirectFile file = DirectFile::open(dir_.file("data"), DirectFile::Mode::kCreate);
  constexpr int kCount = 9;
  const int64_t each = 3 * kBlock;
  std::vector<AlignedBuffer> out, in;
  std::vector<Ticket> tickets;
  for (int i = 0; i < kCount; ++i) {
    out.push_back(random_bytes(each, 100 + i));
    in.emplace_back(each);
    tickets.push_back(engine->submit({&file, i * each, out.back().data(), each, true}));
  }
  std::mt19937 gen(7);
  std::shuffle(tickets.begin(), tickets.end(), gen);
  for (Ticket t : tickets) engine->wait(t);
  // Reads waited all at once, and from two threads submitting at the same time.
  std::thread other([&] {
    for (int i = 0; i < kCount; i += 2) engine->submit({&file, i * each, in[i].data(), each, false});
  });
  for (int i = 1; i < kCount; i += 2) engine->submit({&file, i * each, in[i].data(), each, false});
  other.join();
  engine->wait_all();
  for (int i = 0; i < kCount; ++i) EXPECT_TRUE(same_bytes(out[i], in[i], each)) << "request " << i;
  // Every ticket was taken by wait_all, so none can be waited for again.
  EXPECT_THROW(engine->wait(tickets.front()), UsageError);
  engine->wait_all();   // nothing pending: returns at once
}

TEST_P(IoEngineTest, TruncatedFileIsAShortReadNamingFileAndOffset) {
  auto engine = make_io_engine(options());
  const std::string path = dir_.file("truncated");
  DirectFile file = DirectFile::open(path, DirectFile::Mode::kCreate);
  AlignedBuffer data = random_bytes(4 * kBlock, 3);
  engine->wait(engine->submit({&file, 0, data.data(), 4 * kBlock, true}));
  AlignedBuffer in(4 * kBlock);

  // Cut at an aligned place: the read of the second block gets 4096 bytes, then 0.
  ASSERT_EQ(::ftruncate(file.fd(), kBlock + kAlignmentBytes), 0);
  std::string message = io_error([&] { engine->wait(engine->submit({&file, kBlock, in.data(), kBlock, false})); });
  EXPECT_TRUE(has(message, "short read: got 4096 of 65536 bytes at offset 65536 of " + path)) << message;
  EXPECT_TRUE(has(message, "truncated")) << message;

  // Cut in the middle of a block: O_DIRECT cannot go on at an unaligned place.
  ASSERT_EQ(::ftruncate(file.fd(), kBlock + 100), 0);
  message = io_error([&] { engine->wait(engine->submit({&file, kBlock, in.data(), kBlock, false})); });
  EXPECT_TRUE(has(message, "short read: got 100 of 65536 bytes at offset 65536 of " + path)) << message;

  // A request of many pieces past the end: wait() throws once all of them are done, the
  // engine stays usable, and nothing is left pending.
  message = io_error([&] { engine->wait(engine->submit({&file, 0, in.data(), 4 * kBlock, false})); });
  EXPECT_TRUE(has(message, "short read")) << message;
  EXPECT_TRUE(has(message, path)) << message;
  engine->wait_all();
  round_trip(*engine, file, 0, 2 * kBlock, 4);

  // wait_all reports the failure too.
  engine->submit({&file, 8 * kBlock, in.data(), kBlock, false});
  message = io_error([&] { engine->wait_all(); });
  EXPECT_TRUE(has(message, "short read: got 0 of 65536 bytes at offset 524288 of " + path)) << message;
}

TEST_P(IoEngineTest, FileSizeLimitIsAnErrorNamingFileAndOffset) {
  // RLIMIT_FSIZE in a child process: writes past it fail with EFBIG (SIGXFSZ ignored). The
  // child reports through its exit code: 0 when the error was right, 1 when none came,
  // 2 when the message lacked something, 3 when reserve() was not refused.
  const std::string path = dir_.file("limited");
  const AioOptions o = options();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{static_cast<rlim_t>(2 * kBlock), static_cast<rlim_t>(2 * kBlock)};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int rc = 1;
    try {
      auto engine = make_io_engine(o);
      DirectFile file = DirectFile::open(path, DirectFile::Mode::kCreate);
      AlignedBuffer data = random_bytes(3 * kBlock, 5);
      engine->wait(engine->submit({&file, 0, data.data(), 3 * kBlock, true}));
    } catch (const IoError& e) {
      const std::string m = e.what();
      rc = has(m, "cannot write 65536 bytes at offset 131072 of " + path) && has(m, "File too large") &&
                   has(m, "ulimit -f")
               ? 0
               : 2;
      if (rc == 2) std::fprintf(stderr, "message: %s\n", m.c_str());
    } catch (...) {
      rc = 4;
    }
    if (rc == 0) {
      rc = 3;
      try {
        DirectFile file = DirectFile::open(path, DirectFile::Mode::kReadWrite);
        file.reserve(4 * kBlock);
      } catch (const IoError& e) {
        if (has(e.what(), "cannot reserve 262144 bytes for " + path)) rc = 0;
      }
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error; 2: the message lacks the file, offset or cause; "
                                       "3: reserve() was not refused; 4: another exception";
}

TEST_P(IoEngineTest, FailedWaitIsAnIoErrorForEveryRequestInFlight) {
  if (GetParam() == EngineKind::kThreads) GTEST_SKIP() << "threads: blocking calls, no wait for completions";
  const char* call = GetParam() == EngineKind::kIoUring ? "io_uring_wait_cqe" : "io_getevents";
  // Writes only, and the buffers outlive the engine: the kernel may still read them after
  // the failed wait, as nothing reaps those pieces.
  constexpr int kCount = 3;
  const int64_t each = 2 * kBlock;
  std::vector<AlignedBuffer> out;
  for (int i = 0; i < kCount; ++i) out.push_back(random_bytes(each, 200 + i));
  const std::string path = dir_.file("data");
  DirectFile file = DirectFile::open(path, DirectFile::Mode::kCreate);
  {
    auto engine = make_io_engine(options(4, 1));
    struct Injected {   // cleared however the test ends: the seam is global
      Injected() { detail::set_wait_failure_for_testing(EBADF); }
      ~Injected() { detail::set_wait_failure_for_testing(0); }
    } injected;
    std::vector<Ticket> tickets;
    for (int i = 0; i < kCount; ++i) tickets.push_back(engine->submit({&file, i * each, out[i].data(), each, true}));
    for (int i = 0; i < kCount; ++i) {
      const std::string message = io_error([&] { engine->wait(tickets[i]); });
      EXPECT_TRUE(has(message, "cannot write 65536 bytes at offset ")) << message;
      EXPECT_TRUE(has(message, path)) << message;
      EXPECT_TRUE(has(message, std::string(call) + " failed: Bad file descriptor (errno 9")) << message;
      EXPECT_TRUE(has(message, "ZEROTRAIN_IO_ENGINE=threads")) << message;
    }
    engine->wait_all();   // nothing is left pending
  }
  // The process lives on, and a new engine works.
  auto engine = make_io_engine(options(4, 1));
  round_trip(*engine, file, 0, 3 * kBlock, 9);
}

INSTANTIATE_TEST_SUITE_P(Engines, IoEngineTest,
                         ::testing::Values(EngineKind::kIoUring, EngineKind::kLibaio, EngineKind::kThreads),
                         [](const auto& info) { return std::string(engine_kind_name(info.param)); });

// --- errors that do not depend on the engine ---------------------------------------------

TEST(DirectFile, MissingDirectoryNamesIt) {
  TempDir dir;
  const std::string path = dir.file("nope/states.bin");
  const std::string message = io_error([&] { DirectFile::open(path, DirectFile::Mode::kCreate); });
  EXPECT_TRUE(has(message, "cannot open " + path + " for writing")) << message;
  EXPECT_TRUE(has(message, "the directory " + dir.file("nope") + " does not exist")) << message;
  const std::string missing = io_error([&] { DirectFile::open(dir.file("absent"), DirectFile::Mode::kRead); });
  EXPECT_TRUE(has(missing, "the file does not exist")) << missing;
}

TEST(DirectFile, TmpfsIsRefusedWithTheFix) {
  struct statfs st {};
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != TMPFS_MAGIC) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  const std::string path = "/dev/shm/zerotrain_io_test_" + std::to_string(::getpid());
  const std::string message = io_error([&] { DirectFile::open(path, DirectFile::Mode::kCreate); });
  ::unlink(path.c_str());
  EXPECT_TRUE(has(message, "cannot open " + path)) << message;
  EXPECT_TRUE(has(message, "tmpfs")) << message;
  EXPECT_TRUE(has(message, "put nvme_path on a disk")) << message;
}

// A full disk cannot be made safely on a shared disk; reserve() checks the free space first,
// and a transfer's ENOSPC gets the same fix.
TEST(DirectFile, FullDiskIsRefusedWithTheFix) {
  TempDir dir;
  const std::string path = dir.file("big");
  DirectFile file = DirectFile::open(path, DirectFile::Mode::kCreate);
  struct statvfs vfs {};
  ASSERT_EQ(::fstatvfs(file.fd(), &vfs), 0);
  const int64_t too_much = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize) + (int64_t{1} << 30);
  const std::string message = io_error([&] { file.reserve(too_much); });
  EXPECT_TRUE(has(message, "cannot reserve " + std::to_string(too_much) + " bytes for " + path)) << message;
  EXPECT_TRUE(has(message, "free disk space or point nvme_path at a bigger disk")) << message;
  EXPECT_EQ(file.size_bytes(), 0);
  file.reserve(kBlock);
  EXPECT_EQ(file.size_bytes(), kBlock);

  detail::Piece piece;
  piece.path = &path;
  piece.offset_bytes = 5 * kBlock;
  piece.nbytes = kBlock;
  piece.write = true;
  const std::string full = detail::errno_message(piece, ENOSPC);
  EXPECT_TRUE(has(full, "cannot write 65536 bytes at offset 327680 of " + path + ": No space left on device")) << full;
  EXPECT_TRUE(has(full, "free disk space or point nvme_path at a bigger disk")) << full;
}

TEST(DirectFile, DirectoryIsRefused) {
  TempDir dir;
  const std::string message = io_error([&] { DirectFile::open(dir.path().string(), DirectFile::Mode::kRead); });
  EXPECT_TRUE(has(message, "cannot open " + dir.path().string())) << message;
  EXPECT_TRUE(has(message, "not a regular file") || has(message, "directory")) << message;
}

// A read-only file and a read-only directory. Root ignores permissions, so the opens run in
// a child that has become `nobody`; it reports through its exit code.
TEST(DirectFile, ReadOnlyFileAndDirectoryAreClearErrors) {
  TempDir dir;
  const std::string file_path = dir.file("readonly.bin");
  {
    DirectFile f = DirectFile::open(file_path, DirectFile::Mode::kCreate);
  }
  ASSERT_EQ(::chmod(file_path.c_str(), 0444), 0);
  const fs::path sub = dir.path() / "ro";
  fs::create_directory(sub);
  ASSERT_EQ(::chmod(sub.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(5);
    const std::string a = io_error([&] { DirectFile::open(file_path, DirectFile::Mode::kReadWrite); });
    const std::string b = io_error([&] { DirectFile::open((sub / "new.bin").string(), DirectFile::Mode::kCreate); });
    bool ok = has(a, "cannot open " + file_path + " for writing") && has(a, "Permission denied") &&
              has(a, "fix the permissions") && has(b, "cannot open " + (sub / "new.bin").string()) &&
              has(b, "Permission denied");
    if (!ok) std::fprintf(stderr, "messages:\n%s\n%s\n", a.c_str(), b.c_str());
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 5) GTEST_SKIP() << "cannot drop root to test permissions";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the messages lack the file, the cause or the fix (see stderr)";
}

TEST(IoEngine, MisalignedRequestsAreUsageErrors) {
  TempDir dir;
  auto engine = make_io_engine({.block_size_bytes = kBlock, .engine = EngineKind::kThreads});
  DirectFile file = DirectFile::open(dir.file("data"), DirectFile::Mode::kCreate);
  AlignedBuffer buffer(2 * kBlock);
  auto usage = [&](const Request& r) {
    try {
      engine->submit(r);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_TRUE(has(usage({&file, 100, buffer.data(), kBlock, false}), "offset 100 is not a multiple of 4096"));
  EXPECT_TRUE(has(usage({&file, 0, buffer.data(), 1000, false}), "length 1000 is not a multiple of 4096"));
  EXPECT_TRUE(has(usage({&file, 0, static_cast<char*>(buffer.data()) + 8, kBlock, false}), "is not aligned to 4096"));
  EXPECT_TRUE(has(usage({nullptr, 0, buffer.data(), kBlock, false}), "without an open file"));
  DirectFile reader = DirectFile::open(dir.file("data"), DirectFile::Mode::kRead);
  EXPECT_TRUE(has(usage({&reader, 0, buffer.data(), kBlock, true}), "it was opened for reading"));
  EXPECT_THROW(engine->wait(12345), UsageError);
  EXPECT_THROW(make_io_engine({.block_size_bytes = 1000}), UsageError);
}

TEST(IoEngine, AutoTakesTheFirstEngineThatRuns) {
  EngineKind first = EngineKind::kThreads;
  for (const EngineProbe& p : probe_engines()) {
    if (p.available) {
      first = p.kind;
      break;
    }
  }
  EXPECT_EQ(make_io_engine({})->kind(), first);
  // The probe names every engine, with a reason.
  const auto probes = probe_engines();
  ASSERT_EQ(probes.size(), 3u);
  for (const auto& p : probes) EXPECT_FALSE(p.detail.empty()) << engine_kind_name(p.kind);
}

// A container that forbids io_uring_setup and io_setup (seccomp, EPERM), made in a child
// process with a seccomp filter: the probe says why, auto falls back to threads, and naming
// io_uring is NotSupported with the engines that can run. Exit code 0 when all of that held.
TEST(IoEngine, FallsBackWhenTheKernelRefuses) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_setup, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      ::_exit(5);
    }
    int rc = 0;
    for (const EngineProbe& p : probe_engines()) {
      const bool want = p.kind == EngineKind::kThreads;
      if (p.available != want) rc = 1;
      if (!want && p.detail.find("not built") == std::string::npos &&
          p.detail.find("Operation not permitted") == std::string::npos) {
        std::fprintf(stderr, "probe: %s\n", p.detail.c_str());
        rc = 2;
      }
    }
    if (make_io_engine({})->kind() != EngineKind::kThreads) rc = 3;
    try {
      make_io_engine({.engine = EngineKind::kIoUring});
      rc = 4;
    } catch (const NotSupported& e) {
      if (!has(e.what(), "the engines that run here: threads")) {
        std::fprintf(stderr, "message: %s\n", e.what());
        rc = 6;
      }
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 5) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a probe is wrong; 2: its reason lacks EPERM; 3: auto did not fall back; "
                                       "4: naming io_uring was accepted; 6: the NotSupported message (see stderr)";
}

TEST(IoFromConfig, MapsTheAioBlockAndTheEnvironment) {
  config::AioConfig aio;
  aio.block_size = 262144;
  aio.queue_depth = 16;
  aio.intra_op_parallelism = 2;
  aio.single_submit = true;
  aio.overlap_events = false;
  ::unsetenv(kEngineEnvVar);
  AioOptions o = aio_options(aio);
  EXPECT_EQ(o.block_size_bytes, 262144);
  EXPECT_EQ(o.queue_depth, 16);
  EXPECT_EQ(o.threads, 2);
  EXPECT_TRUE(o.single_submit);
  EXPECT_FALSE(o.overlap_events);
  EXPECT_EQ(o.engine, EngineKind::kAuto);

  ::setenv(kEngineEnvVar, "threads", 1);
  EXPECT_EQ(aio_options(aio).engine, EngineKind::kThreads);
  ::setenv(kEngineEnvVar, "uring", 1);
  try {
    aio_options(aio);
    ADD_FAILURE() << "ZEROTRAIN_IO_ENGINE=uring accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "use auto, io_uring, libaio or threads")) << e.what();
  }
  ::unsetenv(kEngineEnvVar);

  aio.block_size = 1000;
  try {
    aio_options(aio);
    ADD_FAILURE() << "block_size 1000 accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "aio.block_size: must be a multiple of 4096")) << e.what();
  }
}

// The config reader (what `config check` runs) and the IO engine's options refuse the same
// aio values: every bound the engine has is declared in the schema, so a value `config check`
// accepts never stops `train` when the NVMe offload starts its engine.
TEST(IoFromConfig, TheSchemaRefusesWhatTheEngineRefuses) {
  struct Case {
    const char* key;
    int64_t low, high;   // the edges of the range
  };
  const Case cases[] = {{"block_size", 4096, int64_t{1} << 30}, {"queue_depth", 1, 4096}, {"intra_op_parallelism", 1, 256},
                        {"thread_count", 1, 256}};
  ::unsetenv(kEngineEnvVar);
  for (const Case& c : cases) {
    for (const int64_t value : {c.low - 1, c.low, c.high, c.high + 1, int64_t{1} << 31, int64_t{1} << 40}) {
      const std::string text = std::string(R"({"aio": {")") + c.key + "\": " + std::to_string(value) + "}}";
      bool reader_accepts = true, engine_accepts = true;
      std::string why;
      try {
        const config::Config cfg = config::Config::from_string(text);
        try {
          aio_options(cfg.aio);
        } catch (const ConfigError& e) {
          engine_accepts = false;
          why = e.what();
        }
      } catch (const ConfigError& e) {
        reader_accepts = false;
        why = e.what();
        // What the engine would say of the same value, in a config built in C++.
        config::AioConfig aio;
        (std::string(c.key) == "block_size" ? aio.block_size
         : std::string(c.key) == "queue_depth" ? aio.queue_depth
                                               : aio.intra_op_parallelism) = value;
        EXPECT_THROW(aio_options(aio), ConfigError) << c.key << " = " << value;
        engine_accepts = false;
      }
      const bool inside = value >= c.low && value <= c.high;
      EXPECT_EQ(reader_accepts, inside) << c.key << " = " << value << ": " << why;
      EXPECT_EQ(engine_accepts, inside) << c.key << " = " << value << ": " << why;
    }
  }
}

}  // namespace
}  // namespace zerotrain::io
