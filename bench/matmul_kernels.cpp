// LibTorch's fp32 and bf16 matrix products on one thread under each candidate way of
// getting this CPU's fast kernels, side by side: each (round, mechanism) is a fresh child
// process (MKL decides its code path once per process), the mechanisms interleaved in
// turn within each round; the table gives the median GFLOP/s over rounds, its share of the
// core's peak (flop/cycle x /proc/cpuinfo "cpu MHz"), and the median of the per-round
// ratios of zerotrain's choice to MKL's default. Prints a markdown table.
//
// Mechanisms (each a child process of this program):
//   mkl_default      ZEROTRAIN_MATMUL=default: MKL's own choice
//   mkl_avx2         ZEROTRAIN_MATMUL unset: MKL's vendor check answered (zerotrain's choice)
//   mkl_cbwr_avx2    MKL_CBWR=AVX2 (MKL's reproducible mode, AVX2 branch)
//   mkl_enable_avx2  MKL_ENABLE_INSTRUCTIONS=AVX2
//   onednn           every product through oneDNN (at::mkldnn_linear; dense <-> oneDNN
//                    conversions counted, as a training step would pay them)
// bf16 rows: ATen's own bf16 kernel, and the bf16 operands widened to fp32 for MKL's sgemm
// and the result rounded back to bf16 once.
//
// Cases: a 1024^3 product, and the linear layers of the gpt "small" preset (n_embd 256,
// 8 x 128 tokens) and of GPT-2 124M (n_embd 768, 2 x 128 tokens), the micro-batches of
// bench/stage3_vs_peers.py; a linear layer's row times its forward and both backward
// products (6 M K N flop), and attention's batched q k^T.
//
//   matmul_kernels [--rounds N] [--min_time_s S] [--mechanisms a,b,...] [--skip_bf16]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/cpu/matmul_kernels.h"
#include "zerotrain/cpu/matmul_probe.h"
#include "zerotrain/cpu/mkl_vendor_override.h"

using Clock = std::chrono::steady_clock;

namespace {

struct Mechanism {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
};

const std::vector<Mechanism> kMechanisms = {
    {"mkl_default", {{"ZEROTRAIN_MATMUL", "default"}}},
    {"mkl_avx2", {}},
    {"mkl_cbwr_avx2", {{"ZEROTRAIN_MATMUL", "default"}, {"MKL_CBWR", "AVX2"}}},
    {"mkl_enable_avx2", {{"ZEROTRAIN_MATMUL", "default"}, {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}}},
    {"onednn", {{"ZEROTRAIN_MATMUL", "default"}}},
};

// A linear layer: x [m, k] -> y [m, n].
struct Linear {
  std::string name;
  int64_t m, k, n;
};

const std::vector<Linear> kLinears = {
    {"small qkv 1024x256->768", 1024, 256, 768},     {"small proj 1024x256->256", 1024, 256, 256},
    {"small fc 1024x256->1024", 1024, 256, 1024},    {"small out 1024x1024->256", 1024, 1024, 256},
    {"small head 1024x256->1024", 1024, 256, 1024},  {"124M qkv 256x768->2304", 256, 768, 2304},
    {"124M proj 256x768->768", 256, 768, 768},       {"124M fc 256x768->3072", 256, 768, 3072},
    {"124M out 256x3072->768", 256, 3072, 768},      {"124M head 256x768->50304", 256, 768, 50304},
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Median seconds per call over calls made for at least `min_time_s` (at least 3 calls,
// or 1 when one call alone takes longer than that), after one warm-up call.
template <class F>
double time_per_call(F f, double min_time_s) {
  auto t = Clock::now();
  f();
  if (seconds_since(t) > min_time_s) {
    t = Clock::now();
    f();
    return seconds_since(t);
  }
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 || seconds_since(start) < min_time_s) {
    t = Clock::now();
    f();
    times.push_back(seconds_since(t));
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// y = x w^T (+ b) through oneDNN, from and to dense tensors.
at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& w) {
  return at::mkldnn_linear(x.contiguous().to_mkldnn(), w.contiguous().to_mkldnn(), {}).to_dense();
}

// a [m, k] @ b [k, n] under the mechanism.
at::Tensor product(const std::string& mech, const at::Tensor& a, const at::Tensor& b) {
  if (mech == "onednn") return onednn_linear(a, b.t());
  return at::mm(a, b);
}

void child(const std::string& mech, double min_time_s, bool bf16) {
  at::set_num_threads(1);
  at::manual_seed(0);
  auto report = [](const std::string& name, double flop, double seconds) {
    std::printf("%s\t%.3f\n", name.c_str(), flop / seconds / 1e9);
    std::fflush(stdout);
  };
  {
    const auto a = at::randn({1024, 1024}), b = at::randn({1024, 1024});
    report("fp32 mm 1024x1024x1024", 2.0 * 1024 * 1024 * 1024,
           time_per_call([&] { product(mech, a, b); }, min_time_s));
  }
  for (const auto& l : kLinears) {
    const auto x = at::randn({l.m, l.k}), w = at::randn({l.n, l.k}), gy = at::randn({l.m, l.n});
    // forward x w^T, grad_input gy w, grad_weight gy^T x: what nn::Linear runs.
    const double s = time_per_call(
        [&] {
          if (mech == "onednn") {
            onednn_linear(x, w);
            onednn_linear(gy, w.t());
            onednn_linear(gy.t(), x.t());
          } else {
            at::linear(x, w);
            at::mm(gy, w);
            at::mm(gy.t(), x);
          }
        },
        min_time_s);
    report("fp32 linear fwd+bwd " + l.name, 6.0 * l.m * l.k * l.n, s);
  }
  {
    // attention scores of the small preset: 8 x 4 heads, 128 tokens, head dim 64.
    const auto q = at::randn({32, 128, 64}), k = at::randn({32, 128, 64});
    const double s = time_per_call(
        [&] {
          if (mech == "onednn") {
            for (int64_t i = 0; i < 32; ++i) onednn_linear(q[i], k[i]);
          } else {
            at::bmm(q, k.transpose(1, 2));
          }
        },
        min_time_s);
    report("fp32 bmm 32x128x64x128 (small attention)", 2.0 * 32 * 128 * 64 * 128, s);
  }
  if (bf16 && (mech == "mkl_default" || mech == "mkl_avx2")) {
    const auto a = at::randn({1024, 1024}).to(at::kBFloat16), b = at::randn({1024, 1024}).to(at::kBFloat16);
    const double flop = 2.0 * 1024 * 1024 * 1024;
    report("bf16 mm 1024^3, ATen's bf16 kernel", flop, time_per_call([&] { at::mm(a, b); }, min_time_s));
    report("bf16 mm 1024^3, widened to fp32 sgemm", flop,
           time_per_call([&] { at::mm(a.to(at::kFloat), b.to(at::kFloat)).to(at::kBFloat16); }, min_time_s));
    const Linear& l = kLinears[2];
    const auto x = at::randn({l.m, l.k}).to(at::kBFloat16), w = at::randn({l.n, l.k}).to(at::kBFloat16);
    report("bf16 linear fwd " + l.name + ", ATen's bf16 kernel", 2.0 * l.m * l.k * l.n,
           time_per_call([&] { at::linear(x, w); }, min_time_s));
    report("bf16 linear fwd " + l.name + ", widened to fp32 sgemm", 2.0 * l.m * l.k * l.n,
           time_per_call([&] { at::linear(x.to(at::kFloat), w.to(at::kFloat)).to(at::kBFloat16); }, min_time_s));
  }
  // What MKL was told (-1: not asked), so the table can say which path really ran.
  std::printf("#vendor_answer\t%d\n", zerotrain_mkl_vendor_answer());
}

// Runs this program as a child for one mechanism; its "name\tvalue" lines.
std::vector<std::pair<std::string, double>> run_child(const char* self, const Mechanism& m, double min_time_s,
                                                      bool bf16, int* vendor_answer) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::unsetenv("ZEROTRAIN_MATMUL");
    ::unsetenv("MKL_CBWR");
    ::unsetenv("MKL_ENABLE_INSTRUCTIONS");
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (const auto& [k, v] : m.env) ::setenv(k.c_str(), v.c_str(), 1);
    const std::string t = std::to_string(min_time_s);
    ::execl(self, self, "--child", m.name.c_str(), "--min_time_s", t.c_str(), bf16 ? "--bf16" : "--skip_bf16",
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t r; (r = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(r));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "matmul_kernels: child %s failed\n", m.name.c_str());
    std::exit(1);
  }
  std::vector<std::pair<std::string, double>> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    if (line.rfind("#vendor_answer", 0) == 0) {
      *vendor_answer = std::stoi(line.substr(tab + 1));
      continue;
    }
    rows.emplace_back(line.substr(0, tab), std::stod(line.substr(tab + 1)));
  }
  return rows;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  double min_time_s = 0.3;
  bool bf16 = true;
  std::string only, child_mech;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--min_time_s") min_time_s = std::stod(next());
    else if (a == "--mechanisms") only = next();
    else if (a == "--skip_bf16") bf16 = false;
    else if (a == "--bf16") bf16 = true;
    else if (a == "--child") child_mech = next();
    else {
      std::fprintf(stderr, "usage: matmul_kernels [--rounds N] [--min_time_s S] [--mechanisms a,b] [--skip_bf16]\n");
      return 2;
    }
  }
  if (!child_mech.empty()) {
    child(child_mech, min_time_s, bf16);
    return 0;
  }
  std::vector<Mechanism> mechs;
  for (const auto& m : kMechanisms) {
    if (only.empty() || ("," + only + ",").find("," + m.name + ",") != std::string::npos) mechs.push_back(m);
  }
  std::map<std::string, std::map<std::string, std::vector<double>>> gflops;   // case -> mech -> rounds
  std::vector<std::string> order;
  std::map<std::string, int> answers;
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < mechs.size(); ++j) {
      const Mechanism& m = mechs[(j + static_cast<size_t>(r)) % mechs.size()];   // rotate the order each round
      int answer = -1;
      for (const auto& [name, value] : run_child(argv[0], m, min_time_s, bf16, &answer)) {
        if (!gflops.count(name)) order.push_back(name);
        gflops[name][m.name].push_back(value);
      }
      answers[m.name] = answer;
      std::fprintf(stderr, "round %d/%d: %s done\n", r + 1, rounds, m.name.c_str());
    }
  }
  at::set_num_threads(1);
  const zerotrain::cpu::MatmulProbe probe = zerotrain::cpu::probe_matmul(256, 0.01);   // for the peak only
  std::printf("GFLOP/s on 1 thread, median of %d interleaved rounds; peak %.1f GFLOP/s (%d flop/cycle x %.0f MHz "
              "from /proc/cpuinfo); MKL %s\n\n",
              rounds, probe.peak_gflops, probe.flops_per_cycle, probe.clock_mhz,
              zerotrain::cpu::mkl_version().c_str());
  std::printf("| case |");
  for (const auto& m : mechs) std::printf(" %s |", m.name.c_str());
  std::printf(" mkl_avx2 / mkl_default |\n|---|");
  for (size_t j = 0; j < mechs.size(); ++j) std::printf("---:|");
  std::printf("---:|\n");
  for (const auto& name : order) {
    std::printf("| %s |", name.c_str());
    for (const auto& m : mechs) {
      const auto it = gflops[name].find(m.name);
      if (it == gflops[name].end()) {
        std::printf(" - |");
        continue;
      }
      const double v = median(it->second);
      std::printf(" %.1f (%.0f%%) |", v, 100.0 * v / probe.peak_gflops);
    }
    // The median of per-round ratios: each round ran both, so load shared by a round cancels.
    const auto& per = gflops[name];
    if (per.count("mkl_avx2") && per.count("mkl_default")) {
      std::vector<double> ratios;
      const auto& a = per.at("mkl_avx2");
      const auto& d = per.at("mkl_default");
      for (size_t r = 0; r < std::min(a.size(), d.size()); ++r) ratios.push_back(a[r] / d[r]);
      std::printf(" %.2fx |\n", median(ratios));
    } else {
      std::printf(" - |\n");
    }
  }
  std::printf("\nMKL's vendor question answered \"Intel\" in:");
  for (const auto& [m, a] : answers) std::printf(" %s=%s", m.c_str(), a == 1 ? "yes" : a == 0 ? "no" : "not asked");
  std::printf("\n");
  return 0;
}
