// zerotrain/cuda/availability.h on any machine: a fake /dev with nvidia* files, fake nvidia-smi
// programs, and the messages for each way LibTorch's CUDA half can be missing. These decide
// whether a GPU test skips (no GPU shown) or fails (a GPU shown that LibTorch cannot use).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/cuda/availability.h"

namespace fs = std::filesystem;
namespace cuda = zerotrain::cuda;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A folder of its own for each test, removed after it.
class GpuAvailability : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "zt-gpu-availability-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    fs::create_directory(dev());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dev() const { return dir_ / "dev"; }
  void touch(const std::string& name) const { std::ofstream(dev() / name).put('\n'); }
  // An executable shell script standing in for nvidia-smi.
  std::string fake_nvidia_smi(const std::string& body) const {
    const fs::path path = dir_ / "nvidia-smi";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }
  cuda::SightingOptions options(const std::string& nvidia_smi = "") const {
    cuda::SightingOptions o;
    o.dev_dir = dev().string();
    o.nvidia_smi = nvidia_smi;
    return o;
  }

  fs::path dir_;
};

TEST_F(GpuAvailability, AnEmptyDevShowsNoGpu) {
  EXPECT_TRUE(cuda::nvidia_device_nodes(dev().string()).empty());
  const auto seen = cuda::sight_nvidia_gpu(options());
  EXPECT_FALSE(seen.shown);
  EXPECT_EQ(seen.evidence, "");
  EXPECT_TRUE(cuda::nvidia_device_nodes((dir_ / "no such folder").string()).empty());
}

TEST_F(GpuAvailability, OnlyNumberedNodesAreGpus) {
  // A driver without a GPU (or a container given only the control nodes) has these.
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia", "nvidiafoo1"}) {
    touch(name);
  }
  fs::create_directory(dev() / "nvidia-caps");
  EXPECT_TRUE(cuda::nvidia_device_nodes(dev().string()).empty());
  EXPECT_FALSE(cuda::sight_nvidia_gpu(options()).shown);

  touch("nvidia1");
  touch("nvidia0");
  touch("nvidia10");
  EXPECT_EQ(cuda::nvidia_device_nodes(dev().string()), (std::vector<std::string>{"nvidia0", "nvidia1", "nvidia10"}));
  const auto seen = cuda::sight_nvidia_gpu(options());
  EXPECT_TRUE(seen.shown);
  EXPECT_EQ(seen.evidence, dev().string() + "/nvidia0, " + dev().string() + "/nvidia1, " + dev().string() +
                               "/nvidia10");
}

TEST_F(GpuAvailability, NvidiaSmiIsAskedWhenThereIsNoNode) {
  const std::string lists = fake_nvidia_smi(
      "[ \"$1\" = -L ] || exit 9\n"
      "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n"
      "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'");
  const auto seen = cuda::sight_nvidia_gpu(options(lists));
  EXPECT_TRUE(seen.shown);
  EXPECT_EQ(seen.evidence, "nvidia-smi -L: GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0), "
                           "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)");
  // The nodes are enough: nvidia-smi is not asked (its answer would be in the evidence).
  touch("nvidia0");
  EXPECT_EQ(cuda::sight_nvidia_gpu(options(lists)).evidence, dev().string() + "/nvidia0");
}

TEST_F(GpuAvailability, NvidiaSmiThatFindsNothingFailsOrHangsShowsNoGpu) {
  // What nvidia-smi prints on a machine whose driver finds no GPU, with its exit code.
  EXPECT_FALSE(cuda::sight_nvidia_gpu(options(fake_nvidia_smi("echo 'No devices were found'; exit 6"))).shown);
  EXPECT_FALSE(cuda::sight_nvidia_gpu(options(fake_nvidia_smi("echo 'GPU 0: NVIDIA H100'; exit 255"))).shown);
  EXPECT_FALSE(cuda::sight_nvidia_gpu(options((dir_ / "not installed").string())).shown);
  auto hangs = options(fake_nvidia_smi("exec sleep 30"));
  hangs.nvidia_smi_timeout_ms = 200;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(cuda::sight_nvidia_gpu(hangs).shown);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "a hung nvidia-smi is not waited for";
}

TEST_F(GpuAvailability, TheLoadRecordRoundTrips) {
  const cuda::CudaLoad before = cuda::cuda_load();
  cuda::record_cuda_load(cuda::CudaLoadOutcome::kFailed, "/x/libtorch_cuda.so", "libcudnn.so.9: cannot open");
  const cuda::CudaLoad load = cuda::cuda_load();
  EXPECT_EQ(load.outcome, cuda::CudaLoadOutcome::kFailed);
  EXPECT_EQ(load.library, "/x/libtorch_cuda.so");
  EXPECT_EQ(load.error, "libcudnn.so.9: cannot open");
  EXPECT_EQ(cuda::describe(load), "failed to load: libcudnn.so.9: cannot open");
  cuda::record_cuda_load(before.outcome, before.library.c_str(), before.error.c_str());
}

// The message a GPU test fails with, for each outcome: the evidence, the cause in its own
// words, and the fix.
TEST_F(GpuAvailability, TheMessageNamesTheEvidenceTheCauseAndTheFix) {
  touch("nvidia0");
  const auto seen = cuda::sight_nvidia_gpu(options());
  ASSERT_TRUE(seen.shown);
  const std::string shown = "this machine shows an NVIDIA GPU (" + dev().string() + "/nvidia0) but LibTorch sees no "
                            "CUDA device: ";
  struct Case {
    cuda::CudaLoad load;
    std::string runtime;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{cuda::CudaLoadOutcome::kFailed, "/t/lib/libtorch_cuda.so", "libcublas.so.13: cannot open shared object file"},
       "",
       {"(/t/lib/libtorch_cuda.so) failed to load: libcublas.so.13: cannot open shared object file",
        "LD_LIBRARY_PATH"}},
      {{cuda::CudaLoadOutcome::kDisabled, "/t/lib/libtorch_cuda.so", "ZEROTRAIN_CUDA_LOAD=0"},
       "",
       {"not attempted because ZEROTRAIN_CUDA_LOAD=0 is set", "Unset it"}},
      {{cuda::CudaLoadOutcome::kNoDriver, "/t/lib/libtorch_cuda.so", "no /proc/driver/nvidia/version"},
       "",
       {"not attempted because this process found no NVIDIA driver", "(no /proc/driver/nvidia/version)",
        "ZEROTRAIN_CUDA_LOAD=1"}},
      {{cuda::CudaLoadOutcome::kNoLoader, "", ""}, "", {"built without LibTorch's CUDA half", "Rebuild"}},
      {{cuda::CudaLoadOutcome::kLoaded, "/t/lib/libtorch_cuda.so", ""},
       "CUDA driver version is insufficient for CUDA runtime version",
       {"loaded, but the CUDA runtime reports \"CUDA driver version is insufficient for CUDA runtime version\"",
        "nvidia-smi", "CUDA_VISIBLE_DEVICES"}},
  };
  for (const Case& c : cases) {
    const std::string message = cuda::unusable_gpu_message(seen, c.load, c.runtime);
    EXPECT_EQ(message.rfind(shown, 0), 0u) << message;
    for (const auto& needle : c.needles) EXPECT_TRUE(contains(message, needle)) << "lacks: " << needle << "\n" << message;
  }
}

// What autoload.cpp recorded before this test's main(), against this machine: it is compiled
// into every program that links LibTorch in a CUDA build (this one, through
// zerotrain::precision), and into none in a CPU build.
#ifndef ZEROTRAIN_TEST_HAVE_CUDA
#error "define ZEROTRAIN_TEST_HAVE_CUDA to 1 in a build with LibTorch's CUDA half, 0 otherwise (tests/CMakeLists.txt)"
#endif
TEST(GpuAvailabilityHere, TheLoaderRecordedWhatItDidBeforeMain) {
  const cuda::CudaLoad load = cuda::cuda_load();
  const std::string said = cuda::describe(load);
#if ZEROTRAIN_TEST_HAVE_CUDA
  ASSERT_NE(load.outcome, cuda::CudaLoadOutcome::kNoLoader) << "autoload.cpp ran before main() but recorded nothing";
  EXPECT_NE(load.library, "");
  const char* want = std::getenv("ZEROTRAIN_CUDA_LOAD");
  const bool attempted = load.outcome == cuda::CudaLoadOutcome::kLoaded || load.outcome == cuda::CudaLoadOutcome::kFailed;
  const auto exists = [](const char* path) { return fs::exists(path); };
  if (want != nullptr && std::string(want) == "0") {
    EXPECT_EQ(load.outcome, cuda::CudaLoadOutcome::kDisabled) << said;
  } else if ((want != nullptr && std::string(want) == "1") || !cuda::nvidia_device_nodes("/dev").empty() ||
             exists("/proc/driver/nvidia/version") || exists("/dev/nvidiactl")) {
    EXPECT_TRUE(attempted) << "forced, or a driver or GPU node is there: the load must have been attempted; " << said;
  } else {
    EXPECT_EQ(load.outcome, cuda::CudaLoadOutcome::kNoDriver) << said;
    EXPECT_TRUE(contains(said, "not attempted: no NVIDIA driver")) << said;
  }
#else
  EXPECT_EQ(load.outcome, cuda::CudaLoadOutcome::kNoLoader) << said;
  EXPECT_EQ(cuda::cuda_runtime_reason(), "") << "a CPU build has no CUDA runtime to ask";
#endif
}

}  // namespace
