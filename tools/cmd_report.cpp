// `zerotrain --version` and `zerotrain report`: what this build is and what it can use,
// in the spirit of DeepSpeed's ds_report.
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/commands.h"
#include "zerotrain/core/cpu_features.h"
#include "tools/gpu_info.h"
#include "tools/torch_info.h"
#include "zerotrain/comm/report.h"
#include "zerotrain/core/env.h"
#include "zerotrain/cpu/malloc_policy.h"
#include "zerotrain/cpu/matmul_probe.h"
#include "zerotrain/io/io_engine.h"
#include "zerotrain/version.h"

namespace zerotrain::tools {
namespace {

// CPU feature flags as the kernel reports them (/proc/cpuinfo), so the report shows what
// the machine has, whatever this binary was compiled for.
std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// The SIMD features our kernels care about, in the order of their usefulness to us.
const std::vector<std::string> kSimdOfInterest = {
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"};

struct Feature {
  const char* name;
  const char* status;
};

// What this build can do; each issue that lands a capability updates its line.
const std::vector<Feature> kFeatures = {
    {"ds_config parsing and validation", "yes"},
    {"collectives (zerotrain::comm)", "yes"},
    {"ZeRO stages 0, 1, 2 (fp32, bf16, fp16)", "yes"},
    {"ZeRO stage 3 (Sharded units, prefetch, reuse, ZeroInit)", "yes"},
    {"fp16 / bf16 mixed precision (DeepSpeed's loss scaler)", "yes"},
    {"CPU / NVMe offload (optimizer: stages 1-3; parameters: stage 3)", "yes"},
    {"checkpoints (resharding load, zero-to-fp32, inspect)", "yes"},
    {"launcher (zerotrain launch)", "yes"},
    {"memory estimator (zerotrain estimate, advise)", "yes"},
    {"Trainer and zerotrain train (convnet, mlp, gpt)", "yes"},
    {"datasets (Fashion-MNIST, MNIST, CIFAR-10, text, KJV)", "yes"},
    {"logs (progress bar, TensorBoard, CSV, JSON lines)", "yes"},
    {"activation checkpointing", "yes"},
};

std::string gib(int64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024 * 1024) << " GiB";
  return out.str();
}

void print_row(const std::string& key, const std::string& value) {
  std::string dots(key.size() < 38 ? 38 - key.size() : 1, '.');
  std::cout << "  " << key << " " << dots << " " << value << "\n";
}

}  // namespace

std::string version_line() {
  return std::string("zerotrain ") + ZEROTRAIN_VERSION + " (LibTorch " + torch_version() +
         ", " + ZEROTRAIN_CXX_COMPILER + ", " + ZEROTRAIN_BUILD_TYPE + ")";
}

Command add_report_command(CLI::App& app) {
  auto* sub = app.add_subcommand("report", "Show versions, build features and CPU capabilities");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print one JSON object instead of a table");
  return {sub, [json] {
            TorchInfo torch = torch_info();
            std::set<std::string> flags = cpu_flags();
            std::vector<std::string> have, missing;
            for (const auto& f : kSimdOfInterest) (flags.count(f) ? have : missing).push_back(f);
            auto omp = env::get("OMP_NUM_THREADS");
            // What `zerotrain train --bf16_if_native` (the main job) trains in, and why.
            const auto bf16 = cpu::bf16_support();
            const std::string bf16_choice = std::string(bf16.native ? "bf16" : "fp32") + ": " + bf16.reason;
            // Which kernels a 1024^3 fp32 product runs here and its speed (~0.2 s).
            const cpu::MatmulProbe matmul = cpu::probe_matmul();
            // How a training process will reuse one step's memory in the next.
            const cpu::MallocPolicy malloc_policy = cpu::plan_malloc_policy();
            const GpuInfo gpu = gpu_info();
            const GpuProbe probe = gpu_probe(gpu);
            // A failed probe, or a GPU this machine shows that LibTorch cannot use, makes the
            // report fail (exit 1) after printing everything, so that scripts that run it as a
            // check are told.
            auto finish = [&probe] {
              if (!probe.failed()) return 0;
              std::cout.flush();
              std::cerr << "zerotrain: [gpu] "
                        << (probe.unusable.empty() ? "the GPU probe FAILED (see \"GPU paths tested here\")"
                                                   : probe.unusable)
                        << "\n";
              return 1;
            };

            if (*json) {
              nlohmann::ordered_json out;
              out["zerotrain"] = ZEROTRAIN_VERSION;
              out["build_type"] = ZEROTRAIN_BUILD_TYPE;
              out["compiler"] = ZEROTRAIN_CXX_COMPILER;
              out["libtorch"] = {{"version", torch.version}, {"cpu_capability", torch.cpu_capability},
                                 {"blas", torch.blas}, {"threads", torch.num_threads},
                                 {"gloo", torch.gloo}, {"cuda_build", torch.cuda}};
              out["cpu"] = {{"model", cpu::model_name()},
                            {"hardware_threads", std::thread::hardware_concurrency()},
                            {"simd", have}, {"simd_missing", missing},
                            {"bf16_native", bf16.native}, {"bf16_choice", bf16_choice},
                            {"matmul", {{"kernels", matmul.kernels}, {"gflops_1_thread", matmul.gflops},
                                        {"peak_gflops", matmul.peak_gflops}, {"clock_mhz", matmul.clock_mhz},
                                        {"flops_per_cycle", matmul.flops_per_cycle}}},
                            {"malloc", {{"setting", malloc_policy.setting}, {"large_block_cache", malloc_policy.large_block_cache},
                                        {"training_thresholds", malloc_policy.training_thresholds},
                                        {"reason", malloc_policy.reason}}}};
              nlohmann::ordered_json devices = nlohmann::ordered_json::array();
              for (const auto& d : gpu.devices) {
                devices.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memory_bytes},
                                   {"capability", d.capability}});
              }
              out["gpu"] = {{"shown", gpu.shown.shown}, {"shown_by", gpu.shown.evidence},
                            {"cuda_half", gpu.cuda_half}, {"cuda_half_loaded", gpu.cuda_half_loaded},
                            {"cuda_runtime", gpu.runtime_version}, {"cuda_driver", gpu.driver_version},
                            {"nccl", gpu.nccl_version}, {"devices", devices}, {"none_reason", gpu.none_reason},
                            {"unusable", probe.unusable}, {"tested_here", probe.tested},
                            {"probe_passed", probe.passed}, {"probe", probe.lines}};
              for (const auto& f : kFeatures) out["features"][f.name] = f.status;
              for (const auto& b : comm::backend_reports()) {
                out["comm_backends"][b.name] = {{"status", b.status}, {"composed", b.composed}};
              }
              for (const auto& e : io::probe_engines()) {
                out["io_engines"][io::engine_kind_name(e.kind)] = {{"available", e.available}, {"detail", e.detail}};
              }
              std::cout << out.dump(2) << "\n";
              return finish();
            }
            auto join = [](const std::vector<std::string>& v) {
              std::string s;
              for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
              return s.empty() ? std::string("none") : s;
            };
            std::cout << "zerotrain report\n";
            std::cout << "versions\n";
            print_row("zerotrain", std::string(ZEROTRAIN_VERSION) + " (" + ZEROTRAIN_BUILD_TYPE + ")");
            print_row("LibTorch", torch.version);
            print_row("compiler", ZEROTRAIN_CXX_COMPILER);
            std::cout << "LibTorch build\n";
            print_row("CPU kernels (ATen)", torch.cpu_capability);
            print_row("BLAS", torch.blas);
            print_row("threads", std::to_string(torch.num_threads) +
                                      (omp ? " (OMP_NUM_THREADS=" + *omp + ")" : " (OMP_NUM_THREADS unset)"));
            print_row("gloo in LibTorch", torch.gloo ? "yes" : "no");
            print_row("CUDA build", torch.cuda ? "yes" : "no");
            std::cout << "GPUs\n";
            print_row("NVIDIA GPU on this machine", gpu.shown.shown ? "yes: " + gpu.shown.evidence
                                                                    : "no (no /dev/nvidia[0-9]*, nvidia-smi lists none)");
            print_row("LibTorch CUDA half", gpu.cuda_half);
            print_row("CUDA runtime loaded", gpu.runtime_version.empty() ? "none" : gpu.runtime_version);
            print_row("CUDA driver", gpu.driver_version.empty() ? "none" : gpu.driver_version);
            print_row("NCCL loaded", gpu.nccl_version.empty() ? "none (nccl backend not built)" : gpu.nccl_version);
            if (gpu.devices.empty()) print_row("devices", "none: " + gpu.none_reason);
            for (const auto& d : gpu.devices) {
              print_row("cuda:" + std::to_string(d.index), d.name + " (" + gib(d.memory_bytes) + ", compute " +
                                                            d.capability + ")");
            }
            print_row("GPU paths tested here", probe.tested            ? (probe.passed ? "yes, passed" : "yes, FAILED")
                                               : probe.unusable.empty() ? "no"
                                                                        : "no, FAILED: LibTorch cannot use this GPU");
            for (const auto& line : probe.lines) std::cout << "      " << line << "\n";
            std::cout << "CPU\n";
            print_row("model", cpu::model_name());
            print_row("hardware threads", std::to_string(std::thread::hardware_concurrency()));
            print_row("SIMD", join(have));
            print_row("SIMD missing", join(missing));
            print_row("bf16 in hardware", bf16.native ? "yes" : "no");
            print_row("--bf16_if_native picks", bf16_choice);
            print_row("fp32 matmul 1024^3", cpu::describe(matmul));
            print_row("memory between steps", malloc_policy.reason);
            std::cout << "zerotrain features\n";
            for (const auto& f : kFeatures) print_row(f.name, f.status);
            std::cout << "communication backends\n";
            for (const auto& b : comm::backend_reports()) {
              print_row(b.name, b.status);
              for (const auto& c : b.composed) std::cout << "      composed: " << c << "\n";
            }
            // NVMe offload's engines, in the order auto tries them (docs/io.md).
            std::cout << "IO engines (NVMe offload)\n";
            for (const auto& e : io::probe_engines()) {
              print_row(io::engine_kind_name(e.kind), std::string(e.available ? "yes: " : "no: ") + e.detail);
            }
            return finish();
          }};
}

}  // namespace zerotrain::tools
