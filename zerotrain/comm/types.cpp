#include "zerotrain/comm/types.h"

#include <algorithm>
#include <array>

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::comm {
namespace {
constexpr std::array<std::pair<BackendKind, const char*>, 6> kBackendNames{{
    {BackendKind::kAuto, "auto"},
    {BackendKind::kGloo, "gloo"},
    {BackendKind::kMpi, "mpi"},
    {BackendKind::kNccl, "nccl"},
    {BackendKind::kThreads, "threads"},
    {BackendKind::kShm, "shm"},
}};
}  // namespace

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

const char* to_string(BackendKind kind) {
  if (kind == BackendKind::kProcessGroup) return "torch.distributed";
  for (const auto& [k, name] : kBackendNames) {
    if (k == kind) return name;
  }
  return "?";
}

BackendKind parse_backend(std::string_view name, std::string_view origin) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& [k, n] : kBackendNames) {
    if (lower == n) return k;
  }
  throw ConfigError(detail::str(origin, ": unknown communication backend '", name,
                                "'; use one of auto, gloo, mpi, nccl, threads, shm"));
}

CommOptions apply_env(CommOptions options) {
  if (auto name = env::get("ZEROTRAIN_COMM_BACKEND")) {
    options.backend = parse_backend(*name, "ZEROTRAIN_COMM_BACKEND");
  }
  if (auto seconds = env::get_int("ZEROTRAIN_COMM_TIMEOUT_S")) {
    ZT_CHECK(*seconds > 0, ConfigError, "ZEROTRAIN_COMM_TIMEOUT_S=", *seconds,
             ": the collective timeout must be a positive number of seconds");
    options.timeout = std::chrono::seconds(*seconds);
  }
  if (auto debug = env::get_bool("ZEROTRAIN_COMM_DEBUG")) options.check_fingerprints = *debug;
  if (auto shm = env::get_bool("ZEROTRAIN_SHM")) options.shared_memory = *shm;
  return options;
}

int64_t chunk_numel_max(int64_t numel, int world_size) {
  ZT_INTERNAL_ASSERT(world_size > 0 && numel >= 0);
  return (numel + world_size - 1) / world_size;
}

ChunkRange chunk_range(int64_t numel, int world_size, int rank) {
  ZT_INTERNAL_ASSERT(rank >= 0 && rank < world_size, "rank ", rank, " of ", world_size);
  const int64_t chunk = chunk_numel_max(numel, world_size);
  const int64_t offset = std::min<int64_t>(numel, chunk * rank);
  return {offset, std::min<int64_t>(chunk, numel - offset)};
}

}  // namespace zerotrain::comm
