// Vocabulary of the communication layer: reduce ops, backends, options, shard layout.
// No LibTorch here, so the launcher and config code can use it cheaply.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zerotrain::comm {

enum class ReduceOp { kSum, kAvg, kMax };

// kAuto: MPI when the process was started by mpirun (OMPI_COMM_WORLD_* set), Gloo otherwise.
// See docs/comm.md for why, and docs/benchmarks.md for the measurements behind it.
// Under kAuto, kGloo and kMpi, ranks that share a host also talk over shared memory
// (comm/shm/, CommOptions::shared_memory); kShm insists on it.
// kProcessGroup: collectives over a c10d process group made outside the engine (the Python
// script's torch.distributed group, comm/process_group/process_group.h); never chosen by name.
enum class BackendKind { kAuto, kGloo, kMpi, kNccl, kThreads, kProcessGroup, kShm };

const char* to_string(ReduceOp op);
const char* to_string(BackendKind kind);
// "auto", "gloo", "mpi", "nccl", "threads", "shm" (any case); throws ConfigError naming `origin`
// and the accepted names otherwise.
BackendKind parse_backend(std::string_view name, std::string_view origin);

// Default collective timeout. Long enough for a slow first step on a busy 2-core host,
// short enough that a hang is reported in minutes, not the 30-60 of NCCL's watchdog.
inline constexpr std::chrono::seconds kDefaultTimeout{300};

struct CommOptions {
  BackendKind backend = BackendKind::kAuto;
  // Every wait gives up after this long and throws TimeoutError naming the collective,
  // its sequence number and the ranks that did not arrive.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Before each collective the ranks exchange its fingerprint (op, dtype, numel, root) and
  // a mismatch throws CommError on every rank instead of hanging or corrupting data.
  // One extra small all_gather per collective: for debugging.
  bool check_fingerprints = false;
  // Bytes per bucket of the *_coalesced collectives (0: one bucket per dtype run).
  int64_t bucket_nbytes = 25 * 1024 * 1024;
  // Ranks that share a host exchange data over shared memory, and only one rank per host
  // crosses the network (comm/shm/). ZEROTRAIN_SHM=0 turns it off.
  bool shared_memory = true;
};

// Applies ZEROTRAIN_COMM_BACKEND, ZEROTRAIN_COMM_TIMEOUT_S, ZEROTRAIN_COMM_DEBUG (1 turns
// on check_fingerprints) and ZEROTRAIN_SHM (0 turns off shared memory) over `options`: the environment overrides the config.
CommOptions apply_env(CommOptions options);

// The contiguous chunk of a flat buffer of `numel` elements that `rank` owns in
// reduce_scatter/all_gather: chunks of ceil(numel / world_size), the last ones shorter
// (possibly empty) when numel does not divide.
struct ChunkRange {
  int64_t offset = 0;
  int64_t numel = 0;
};
int64_t chunk_numel_max(int64_t numel, int world_size);
ChunkRange chunk_range(int64_t numel, int world_size, int rank);

}  // namespace zerotrain::comm
