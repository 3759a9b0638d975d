// The fused Adam step against torch::optim::AdamW, side by side in one run, on 1 and 2
// threads, at 1M, 10M and 100M parameters, beside this machine's STREAM-triad bandwidth.
//   - "list": the parameters as a realistic list of tensors (GPT-2-like shapes); torch steps
//     the list, zerotrain steps the same parameters as the one flat buffer its engine keeps.
//   - "flat": one flat tensor for both.
// Adam moves 28 bytes per parameter per step (reads p, g, m, v; writes p, m, v); GB/s below
// counts those bytes, and "% triad" compares them with the triad's (STREAM's convention:
// 3 x 4 bytes per element, write-allocate not counted). Prints a markdown table.
//
//   adam_step [--max_params N] [--min_time_s S]
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "zerotrain/optim/adam_kernel.h"
#include "zerotrain/optim/fused_adam.h"

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs `step` until `min_time_s` has passed (at least twice); seconds per call.
template <class F>
double time_per_call(F step, double min_time_s) {
  step();   // warm up: first-touch page faults, lazy state
  int calls = 0;
  const auto start = Clock::now();
  do {
    step();
    ++calls;
  } while (seconds_since(start) < min_time_s || calls < 2);
  return seconds_since(start) / calls;
}

// STREAM's triad, a = b + s c, through ATen's vectorised, multithreaded add.
double triad_gbps(int64_t n, double min_time_s) {
  auto a = at::zeros({n}), b = at::ones({n}), c = at::ones({n});
  const double t = time_per_call([&] { at::add_out(a, b, c, 3.0); }, min_time_s);
  return 12.0 * static_cast<double>(n) / t / 1e9;
}

// GPT-2-like shapes, repeated until `numel` parameters.
std::vector<at::Tensor> realistic_list(int64_t numel) {
  const std::vector<std::vector<int64_t>> shapes = {{768, 2304}, {2304}, {768, 768}, {768}, {768}, {768},
                                                    {768, 3072}, {3072}, {3072, 768}, {768}, {768}, {768}};
  std::vector<at::Tensor> list;
  int64_t total = 0;
  for (size_t i = 0; total < numel; ++i) {
    auto shape = shapes[i % shapes.size()];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (total + n > numel) shape = {numel - total}, n = numel - total;
    list.push_back(at::randn(shape) * 0.02);
    total += n;
  }
  return list;
}

double torch_adamw_step(std::vector<at::Tensor> params, double min_time_s) {
  for (auto& p : params) {
    p.set_requires_grad(true);
    p.mutable_grad() = at::randn_like(p) * 0.01;
  }
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  return time_per_call([&] { opt.step(); }, min_time_s);
}

double fused_step(int64_t numel, double min_time_s) {
  auto p = at::randn({numel}) * 0.02, g = at::randn({numel}) * 0.01, m = at::zeros({numel}), v = at::zeros({numel});
  zerotrain::optim::AdamOptions o{1e-3, 0.9, 0.999, 1e-8, 0.01, true, true};
  int64_t step = 0;
  return time_per_call([&] { zerotrain::optim::fused_adam_step(o, ++step, p, g, m, v); }, min_time_s);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_params = 100'000'000;
  double min_time_s = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--max_params") max_params = std::stoll(argv[i + 1]);
    else if (k == "--min_time_s") min_time_s = std::stod(argv[i + 1]);
  }
  std::printf("SIMD target: %s\n\n", zerotrain::optim::adam_target().c_str());
  std::printf("| params | threads | triad GB/s | torch AdamW list | torch AdamW flat | zerotrain fused | fused / torch list | fused / torch flat | fused GB/s | fused %% triad |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    const double triad = triad_gbps(32'000'000, min_time_s);
    for (int64_t n = 1'000'000; n <= max_params; n *= 10) {
      const double t_list = torch_adamw_step(realistic_list(n), min_time_s);
      const double t_flat = torch_adamw_step({at::randn({n}) * 0.02}, min_time_s);
      const double t_fused = fused_step(n, min_time_s);
      const double gbps = 28.0 * static_cast<double>(n) / t_fused / 1e9;
      std::printf("| %lldM | %d | %.1f | %.1f ms | %.1f ms | %.1f ms | %.1fx | %.1fx | %.1f | %.0f%% |\n",
                  static_cast<long long>(n / 1'000'000), threads, triad, t_list * 1e3, t_flat * 1e3, t_fused * 1e3,
                  t_list / t_fused, t_flat / t_fused, gbps, 100.0 * gbps / triad);
      std::fflush(stdout);
    }
  }
  return 0;
}
