#include "zerotrain/cuda/availability.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

extern char** environ;

namespace zerotrain::cuda {
namespace {

int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// `program -L`'s standard output, or "" when it cannot start, fails, or outlives `timeout_ms`
// (then it is killed). No shell: the program is a path or a name looked up in PATH.
std::string nvidia_smi_list(const std::string& program, int timeout_ms) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>("-L"), nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string text;
  if (spawned != 0) {
    ::close(out[0]);
    return "";
  }
  const int64_t deadline = now_ms() + timeout_ms;
  bool timed_out = false;
  char buffer[4096];
  for (;;) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out[0], POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return text;
}

// nvidia-smi -L lists one GPU a line: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)".
std::vector<std::string> gpu_lines(const std::string& listing) {
  std::vector<std::string> gpus;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("GPU ", 0) == 0) gpus.push_back(line);
  }
  return gpus;
}

std::string join(const std::vector<std::string>& parts, const std::string& prefix) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + prefix + p;
  return s;
}

// Written before main() by autoload.cpp: a function-local static, so that it exists whatever
// the order in which the program's static initialisers run.
CudaLoad& recorded() {
  static CudaLoad load;
  return load;
}

}  // namespace

std::vector<std::string> nvidia_device_nodes(const std::string& dev_dir) {
  std::vector<std::string> nodes;
  DIR* dir = ::opendir(dev_dir.c_str());
  if (dir == nullptr) return nodes;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      nodes.push_back(name);
    }
  }
  ::closedir(dir);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

GpuSighting sight_nvidia_gpu(const SightingOptions& options) {
  const auto nodes = nvidia_device_nodes(options.dev_dir);
  if (!nodes.empty()) return {true, join(nodes, options.dev_dir + "/")};
  if (options.nvidia_smi.empty()) return {};
  const auto gpus = gpu_lines(nvidia_smi_list(options.nvidia_smi, options.nvidia_smi_timeout_ms));
  if (gpus.empty()) return {};
  return {true, "nvidia-smi -L: " + join(gpus, "")};
}

void record_cuda_load(CudaLoadOutcome outcome, const char* library, const char* error) {
  recorded() = {outcome, library ? library : "", error ? error : ""};
}

CudaLoad cuda_load() { return recorded(); }

std::string describe(const CudaLoad& load) {
  switch (load.outcome) {
    case CudaLoadOutcome::kNoLoader:
      return "not built (this program was built without LibTorch's CUDA half)";
    case CudaLoadOutcome::kDisabled:
      return "not attempted: ZEROTRAIN_CUDA_LOAD=0";
    case CudaLoadOutcome::kNoDriver:
      return "not attempted: no NVIDIA driver (" + load.error + "); ZEROTRAIN_CUDA_LOAD=1 forces it";
    case CudaLoadOutcome::kLoaded:
      return "loaded";
    case CudaLoadOutcome::kFailed:
      return "failed to load: " + load.error;
  }
  return "unknown";
}

std::string cuda_runtime_reason() {
  // Looked up in the process rather than linked: this file compiles without CUDA, and a
  // CUDA build's programs hold the runtime (linked, or loaded with libtorch_cuda).
  using Count = int (*)(int*);
  using ErrorString = const char* (*)(int);
  using LastError = int (*)();
  auto count_devices = reinterpret_cast<Count>(::dlsym(RTLD_DEFAULT, "cudaGetDeviceCount"));
  auto error_string = reinterpret_cast<ErrorString>(::dlsym(RTLD_DEFAULT, "cudaGetErrorString"));
  auto last_error = reinterpret_cast<LastError>(::dlsym(RTLD_DEFAULT, "cudaGetLastError"));
  if (count_devices == nullptr || error_string == nullptr) return "";
  int count = 0;
  const int error = count_devices(&count);
  if (last_error != nullptr) last_error();   // clear it: LibTorch and the report ask again
  if (error != 0) return error_string(error);
  return count == 0 ? "no devices" : "";
}

std::string unusable_gpu_message(const GpuSighting& sighting, const CudaLoad& load, const std::string& runtime_reason) {
  std::string m = "this machine shows an NVIDIA GPU (" + sighting.evidence + ") but LibTorch sees no CUDA device: ";
  switch (load.outcome) {
    case CudaLoadOutcome::kNoLoader:
      return m + "this program was built without LibTorch's CUDA half (against a CPU build of torch, or with "
                 "-DZEROTRAIN_CUDA=OFF). Rebuild against a CUDA torch wheel (docs/gpu.md, Building)";
    case CudaLoadOutcome::kDisabled:
      return m + "loading LibTorch's CUDA half was not attempted because ZEROTRAIN_CUDA_LOAD=0 is set. Unset it";
    case CudaLoadOutcome::kNoDriver:
      return m + "loading LibTorch's CUDA half was not attempted because this process found no NVIDIA driver when it "
                 "started (" + load.error + "). Check that the driver is installed and that its device nodes are "
                 "visible to this process (in a container: --gpus or the NVIDIA container runtime); "
                 "ZEROTRAIN_CUDA_LOAD=1 loads it regardless";
    case CudaLoadOutcome::kFailed:
      return m + "LibTorch's CUDA half (" + load.library + ") failed to load: " + load.error +
             ". Install what the error names (usually the torch wheel's nvidia-* CUDA packages beside it, or the "
             "NVIDIA driver's libcuda.so.1), or add the folder that holds it to LD_LIBRARY_PATH";
    case CudaLoadOutcome::kLoaded:
      break;
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return m + "LibTorch's CUDA half loaded, but the CUDA runtime reports " +
         (runtime_reason.empty() ? std::string("no usable device") : "\"" + runtime_reason + "\"") +
         ". Check that the NVIDIA driver supports this CUDA runtime (nvidia-smi prints the newest CUDA version "
         "the driver supports; `zerotrain report` the runtime's) and that CUDA_VISIBLE_DEVICES (" +
         (visible ? "\"" + std::string(visible) + "\"" : std::string("unset")) + ") does not hide the GPU";
}

}  // namespace zerotrain::cuda
