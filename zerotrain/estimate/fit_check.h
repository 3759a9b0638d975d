// Before training: will the job fit in the memory this host has left? The estimator's peak
// for the config at hand, times the ranks that share the host, against memory::available().
// A job that would be killed by the kernel's OOM killer minutes in is refused at start-up
// with what to change (the stage advisor's answer). No LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "zerotrain/config/config.h"
#include "zerotrain/estimate/detailed.h"

namespace zerotrain::estimate {

// The estimator's setup for a resolved config: stage, precision, buckets, stage-3 bounds,
// offload, the micro-batch.
Setup setup_from_config(const Config& config, int world_size);

struct FitOptions {
  int ranks_on_host = 1;           // ranks sharing this host's memory (LOCAL_WORLD_SIZE)
  int64_t already_used_bytes = 0;  // this process's resident memory now (counted in the peak)
  double warn_fraction = 0.85;     // warn above this share of what is available
};

struct FitVerdict {
  enum class Kind { kFits, kTight, kTooLarge, kUnknown } kind = Kind::kUnknown;
  int64_t needed_bytes = 0;      // still to be allocated by the ranks of this host
  int64_t available_bytes = 0;
  std::string message;           // for kTight and kTooLarge: the numbers and what to change
};

FitVerdict check_fit(const ModelShape& model, const Setup& setup, const FitOptions& options);

}  // namespace zerotrain::estimate
