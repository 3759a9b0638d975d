// What this CPU computes natively, read at run time (machines of one kind differ: one had
// AVX512-BF16 and AMX, where bf16 training ran 1.8x faster than fp32; another had AVX2
// only, where it ran 7-10x slower).
#pragma once

#include <string>
#include <vector>

namespace zerotrain::cpu {

struct Bf16Support {
  bool native = false;                // AVX512-BF16 or AMX-BF16
  std::vector<std::string> flags;     // the flags that make it native ("avx512_bf16", "amx_bf16")
  std::string reason;                 // one line for logs: why bf16 is or is not native
};

// From /proc/cpuinfo's first "flags" line (x86 Linux); elsewhere: not native, and why.
Bf16Support bf16_support();
// The CPU's model name, or "unknown CPU".
std::string model_name();

}  // namespace zerotrain::cpu
