// What the nccl backend does where it cannot run (no GPU), a world of one without
// MASTER_ADDR, and the report's nccl line. The collectives themselves need a GPU:
// tests/gpu/comm_nccl_gpu_test.cpp (ctest -L gpu).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <regex>
#include <string>

#include "tests/unit/comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/report.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm {
namespace {

using test::contains;
using test::EnvGuard;
using test::error_of;

CommOptions nccl_options() {
  CommOptions options = test::options_with();
  options.backend = BackendKind::kNccl;
  return options;
}

TEST(CommNccl, WithoutAGpuTheErrorSaysSoAndNamesTheWayOut) {
  EnvGuard env;   // a world of one, with no MASTER_ADDR: the GPU check comes first anyway
  if (nccl_version().empty()) {
    const std::string message = error_of<NotSupported>([] { Communicator::init(nccl_options()); }, "nccl");
    EXPECT_TRUE(contains(message, "built without NCCL")) << message;
    EXPECT_TRUE(contains(message, "use the gloo or mpi backend")) << message;
    return;
  }
  if (torch::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible; gpu_comm_tests covers nccl here";
  const std::string message = error_of<ConfigError>([] { Communicator::init(nccl_options()); }, "nccl");
  EXPECT_TRUE(contains(message, "the nccl backend needs a GPU; none is visible (torch::cuda::device_count() == 0): "
                                "use gloo or mpi on CPU"))
      << message;
  // The same from a launcher's environment of several ranks: refused before any rendezvous
  // (no MASTER_ADDR is set, and it is not what the message is about).
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("LOCAL_RANK", "1");
  const std::string launched = error_of<ConfigError>([] { Communicator::init(nccl_options()); }, "nccl, 2 ranks");
  EXPECT_TRUE(contains(launched, "none is visible")) << launched;
}

TEST(CommNccl, AWorldOfOneNeedsNoMasterAddress) {
  // gloo and auto at world size 1 run in-process: nothing to meet, so no MASTER_ADDR.
  for (BackendKind kind : {BackendKind::kGloo, BackendKind::kAuto}) {
    for (bool from_launcher : {false, true}) {
      EnvGuard env;
      if (from_launcher) {   // torchrun --nproc_per_node 1 sets these, and the master too; here it does not
        env.set("RANK", "0");
        env.set("WORLD_SIZE", "1");
        env.set("LOCAL_RANK", "0");
      }
      const std::string what = std::string(to_string(kind)) + (from_launcher ? ", RANK/WORLD_SIZE set" : "");
      CommOptions options = test::options_with(25 << 20, /*fingerprints=*/true);
      options.backend = kind;
      Communicator c = Communicator::init(options);
      EXPECT_EQ(c.world_size(), 1) << what;
      EXPECT_EQ(c.rank(), 0) << what;
      at::Tensor t = at::arange(10, at::kFloat);
      c.all_reduce(t, ReduceOp::kAvg).wait();
      test::expect_same(t, at::arange(10, at::kFloat), what);
      at::Tensor out = at::empty({10}, at::kFloat);
      c.all_gather(t, out).wait();
      test::expect_same(out, t, what);
      c.barrier().wait();   // fingerprint checks on: the barrier's exchange runs too
      EXPECT_EQ(c.issued(), 3) << what;
    }
  }
}

TEST(CommNccl, ReportLineSaysWhatWasLoadedAndWhatIsVisible) {
  EXPECT_EQ(nccl_status("2.28.9", 0), "compiled (NCCL 2.28.9 loaded); untested on this machine: no GPU visible");
  EXPECT_EQ(nccl_status("2.28.9", 1), "compiled (NCCL 2.28.9 loaded); 1 GPU visible");
  EXPECT_EQ(nccl_status("2.30.7", 8), "compiled (NCCL 2.30.7 loaded); 8 GPUs visible");
  EXPECT_TRUE(contains(nccl_status("", 0), "not built")) << nccl_status("", 0);

  // The line backend_reports() gives, from what this process measured.
  const std::string version = nccl_version();
  std::string line;
  for (const auto& b : backend_reports()) {
    if (b.name == "nccl") line = b.status;
  }
  ASSERT_FALSE(line.empty()) << "backend_reports() has no nccl entry";
  if (version.empty()) {
    EXPECT_TRUE(contains(line, "not built")) << line;
    return;
  }
  // ncclGetVersion answered: a real version, the one named in the line.
  EXPECT_TRUE(std::regex_match(version, std::regex(R"(2\.\d+\.\d+)"))) << version;
  EXPECT_EQ(line, nccl_status(version, static_cast<int>(torch::cuda::device_count())));
}

}  // namespace
}  // namespace zerotrain::comm
