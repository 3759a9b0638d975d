#include "zerotrain/core/cpu_features.h"

#include <fstream>
#include <set>
#include <sstream>

namespace zerotrain::cpu {
namespace {

// The value of the first "key : value" line of /proc/cpuinfo whose key is `key`.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name == key) return line.substr(std::min(line.size(), colon + 2));
  }
  return "";
}

}  // namespace

Bf16Support bf16_support() {
  Bf16Support s;
  const std::string flags = cpuinfo_field("flags");
  if (flags.empty()) {
    s.reason = "no x86 flags in /proc/cpuinfo, so bf16 is taken as emulated";
    return s;
  }
  std::set<std::string> have;
  std::istringstream words(flags);
  for (std::string w; words >> w;) have.insert(w);
  for (const char* f : {"avx512_bf16", "amx_bf16"}) {
    if (have.count(f)) s.flags.push_back(f);
  }
  s.native = !s.flags.empty();
  if (s.native) {
    s.reason = "the CPU has " + s.flags.front() + (s.flags.size() > 1 ? " and " + s.flags.back() : "") +
               " (bf16 matrix products in hardware)";
  } else {
    s.reason = std::string("the CPU has neither avx512_bf16 nor amx_bf16 (") +
               (have.count("avx512f") ? "AVX-512" : have.count("avx2") ? "AVX2" : "no AVX2") +
               " only): bf16 would be emulated, several times slower than fp32";
  }
  return s;
}

std::string model_name() {
  const std::string name = cpuinfo_field("model name");
  return name.empty() ? "unknown CPU" : name;
}

}  // namespace zerotrain::cpu
