// MKL's vendor check, answered so that it picks kernels by instruction set on AMD CPUs.
//
// Why: MKL (2024.0 in the torch 2.15 wheel) takes its AVX2/AVX-512 code paths only when
// its internal mkl_serv_intel_cpu_true() says the CPU is Intel's; elsewhere it runs its
// "def" kernels, whatever the CPU can do (a profile of a training step on an AMD EPYC
// with AVX2+FMA: mkl_blas_def_sgemm_kernel_0_zen; with this answer,
// mkl_blas_avx2_sgemm_kernel_*). MKL_DEBUG_CPU_TYPE is gone from MKL since 2020.1,
// MKL_ENABLE_INSTRUCTIONS only lowers the ceiling, and MKL_CBWR fixes a reproducible
// path (docs/benchmarks.md, "Matrix kernels on this CPU", has the measurements).
//
// How it takes effect although MKL is linked statically into libtorch_cpu.so: the wheel
// exports that function and calls it through its PLT (an R_X86_64_JUMP_SLOT relocation),
// so a definition earlier in the symbol search order wins. An executable comes first,
// and a definition in it is exported because libtorch_cpu.so names the symbol; LD_PRELOAD
// does the same for processes we do not link (Python). MKL asks once, at its first call,
// and keeps the answer, so nothing needs to run before that.
//
// When: only on an x86 CPU that is not Intel's and that has AVX2 and FMA with the OS
// saving the AVX state, so the path MKL then picks by instruction set runs on it (MKL
// still reads the instruction-set flags itself). On Intel CPUs, and with
// ZEROTRAIN_MATMUL=default, MKL's own answer is returned unchanged.
#include "zerotrain/cpu/mkl_vendor_override.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace {

std::atomic<int> g_answer{-1};

bool is_genuine_intel() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
#else
  return false;
#endif
}

bool has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the OS's XSAVE support for the AVX registers.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// MKL's own answer: the next definition after ours (libtorch_cpu.so's).
int mkl_own_answer() {
  using Fn = int (*)();
  static const Fn next = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "mkl_serv_intel_cpu_true"));
  if (next) return next();
  return is_genuine_intel() ? 1 : 0;
}

}  // namespace

extern "C" {

int zerotrain_mkl_vendor_would_override(void) {
  const char* choice = std::getenv("ZEROTRAIN_MATMUL");
  // Anything but unset/"auto" keeps MKL's own answer; select_matmul_kernels() rejects
  // values it does not know before training starts.
  if (choice && *choice && std::strcmp(choice, "auto") != 0) return 0;
  static const bool eligible = !is_genuine_intel() && has_avx2_fma();
  return eligible ? 1 : 0;
}

int zerotrain_mkl_vendor_answer(void) { return g_answer.load(); }

// The symbol MKL calls; its name and signature are MKL's.
__attribute__((visibility("default"))) int mkl_serv_intel_cpu_true(void) {
  const int answer = zerotrain_mkl_vendor_would_override() ? 1 : mkl_own_answer();
  g_answer.store(answer);
  return answer;
}

}  // extern "C"
