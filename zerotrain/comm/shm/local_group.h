// The ranks of one host, joined over one shared-memory segment: the collectives the stages
// use, as plain memory operations. No LibTorch here (buffers are pointers and counts), so the
// kernels and their tests build fast; comm/shm/shm_backend.cpp adapts it to comm's Backend.
//
// The segment is a memfd that the group's first member creates and hands to the others over
// an abstract Unix socket (SCM_RIGHTS): it has no name in any filesystem, so nothing is left
// behind however the processes end, SIGKILL of every member included.
//
// Every call is blocking and collective: all members call the same operations in the same
// order. A message of any size streams through fixed slots in rounds, and each member
// reduces its share of every round, so the work is split across the members. Reductions of
// fp16/bf16 accumulate in fp32 in member order, so every member gets the same bits.
// A call that cannot finish within the timeout throws zerotrain::TimeoutError; one whose
// peer process has exited throws zerotrain::CommError naming the member; either way the
// group is broken for every member from then on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zerotrain::comm::shm {

enum class Dtype { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kInt8 };
enum class Op { kSum, kAvg, kMax };   // kAvg of an integer truncates toward zero

// Bytes per element of `dtype`.
int64_t dtype_bytes(Dtype dtype);
const char* dtype_name(Dtype dtype);

// How the members find each other before the segment exists: the job's rendezvous store,
// under a key prefix that is unique to this group. get() blocks until the key is set and
// throws zerotrain::TimeoutError when it is not set within the group's timeout.
struct Exchange {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key)> get;
};

struct LocalGroupOptions {
  // Every wait of a collective gives up after this long.
  std::chrono::milliseconds timeout{300'000};
  // Bytes of one member's slot for one round; larger messages stream through in rounds.
  int64_t slot_bytes = int64_t{1} << 20;
  // The job's rank of each member (size() entries; empty: the member indices), for messages.
  std::vector<int> job_ranks;
};

class LocalGroup {
 public:
  // Member `rank` of `size` joins. Member 0 creates the segment; the others receive it.
  // Throws CommError (or TimeoutError) naming what failed and which member is missing.
  static std::unique_ptr<LocalGroup> join(const Exchange& exchange, int rank, int size,
                                          const LocalGroupOptions& options = {});
  virtual ~LocalGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // `data` (numel elements) becomes the reduction over all members, in place.
  virtual void all_reduce(void* data, int64_t numel, Dtype dtype, Op op) = 0;
  // `input` holds size() chunks of chunk_numel elements; `output` (chunk_numel) gets the
  // reduction of chunk rank() over all members. input and output may not overlap.
  virtual void reduce_scatter(const void* input, void* output, int64_t chunk_numel, Dtype dtype, Op op) = 0;
  // `output` (size() * chunk_bytes) gets every member's `input` (chunk_bytes), in member order.
  virtual void all_gather(const void* input, void* output, int64_t chunk_bytes) = 0;
  // `data` (nbytes) becomes member `root`'s on every member.
  virtual void broadcast(void* data, int64_t nbytes, int root) = 0;
  virtual void barrier() = 0;
};

}  // namespace zerotrain::comm::shm
