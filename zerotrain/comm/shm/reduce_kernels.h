// Element-wise reductions over the members' buffers, vectorised with Highway (run-time
// dispatch: one build, the best SIMD target of the CPU that runs it).
//
// out[i] = op(src[0][i], src[1][i], ..., src[n-1][i]), folded in source order 0..n-1, so
// every member that reduces the same sources gets the same bits. Accumulation is float32 for
// fp32/fp16/bf16 (fp16/bf16 are widened exactly and rounded back to nearest-even, NaN as
// c10 writes it: the bits of `.to(kFloat)`, sum, `.to(kHalf/kBFloat16)`), double for fp64,
// and the integer type itself for integers (wrapping, as a tensor's add_ does). kAvg divides
// the sum by n in the accumulation type (integers truncate toward zero). kMax is NaN when any
// source is NaN (the first NaN in source order); among equal values it keeps the earlier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/comm/shm/local_group.h"

namespace zerotrain::comm::shm {

// Most sources one call folds (the tail of a range goes through per-source stack buffers).
inline constexpr int kMaxReduceSources = 64;

// `srcs` has n (1..kMaxReduceSources) pointers to numel elements each; `out` may be one of
// them (in place) but may not overlap any other source partially. Pointers need no alignment.
// `also_out` (optional) gets a second copy of the result: the own share of an all_reduce
// goes to the own buffer and to the segment for the others in one pass.
void reduce(Dtype dtype, Op op, void* out, const void* const* srcs, int n, int64_t numel,
            void* also_out = nullptr);

// memcpy for the copies between the members' buffers and the segment. Why not memcpy itself:
// from 2 KiB up, glibc copies with `rep movsb`, which some AMD CPUs run about 25x slower when
// the destination lies 1 to 31 bytes after the source modulo 4 KiB; a user's buffer (a view
// at any offset) meets the segment's cache-line-aligned slots at every distance.
void copy_bytes(void* dst, const void* src, int64_t nbytes);

// For tests and benchmarks: the SIMD targets compiled in and supported here, and forcing one
// (0: back to the best).
std::string reduce_target();
std::vector<int64_t> reduce_available_targets();
std::string reduce_target_name(int64_t target);
void reduce_force_target(int64_t target);

// c10's conversions, one element (the scalar path of targets without exact vector ones).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

}  // namespace zerotrain::comm::shm
