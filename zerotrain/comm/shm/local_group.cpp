// The collectives of a LocalGroup over its segment (segment.h) and waits (wait.h).
//
// A message streams through the segment in rounds. Round k uses buffer set k % 2: a member
// writes set s in round k only after the wait of round k-1, which every member reaches only
// after it finished reading round k-2 (the last use of set s). So each operation needs one
// wait between its writes and its reads, and none after its reads.
//
//   all_reduce:     copy the others' shares of the round into the own slot; wait; reduce
//                   the own share from every slot (the own part from `data`) into `data`
//                   and the result area; wait; copy the others' shares out.
//                   Small messages: copy; wait; every member reduces everything (same bits:
//                   member order), one wait.
//   reduce_scatter: copy the round's piece of every other member's chunk into the own slot;
//                   wait; reduce the own chunk's piece from every slot into the output.
//   all_gather:     copy the round's piece into the own slot; wait; copy every slot out.
//   broadcast:      the root copies into its slot; wait; the others copy out.
#include <algorithm>

#include "zerotrain/comm/shm/local_group.h"
#include "zerotrain/comm/shm/reduce_kernels.h"
#include "zerotrain/comm/shm/segment.h"
#include "zerotrain/comm/shm/wait.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::shm {
namespace {

// Up to this many bytes an all_reduce takes the one-wait path where every member reduces the
// whole message: below it the second wait costs more than reducing n times the data.
constexpr int64_t kSmallAllReduceBytes = 16 * 1024;
constexpr int64_t kCacheLine = 64;

// [begin, end) of member `m`'s share of `numel` elements, split at cache lines.
std::pair<int64_t, int64_t> share_of(int m, int size, int64_t numel, int64_t element_bytes) {
  const int64_t unit = std::max<int64_t>(1, kCacheLine / element_bytes);
  const int64_t units = (numel + unit - 1) / unit;
  const int64_t begin = std::min(numel, units * m / size * unit);
  const int64_t end = std::min(numel, units * (m + 1) / size * unit);
  return {begin, end};
}

class ShmLocalGroup final : public LocalGroup {
 public:
  ShmLocalGroup(Segment segment, int rank, const LocalGroupOptions& options, WaitOptions wait_options)
      : segment_(std::move(segment)),
        rendezvous_(segment_, rank, options.job_ranks, wait_options),
        rank_(rank),
        size_(segment_.layout().size),
        slot_bytes_(segment_.layout().slot_bytes) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void join_barrier() { rendezvous_.arrive_and_wait("joining the group"); }

  void all_reduce(void* data, int64_t numel, Dtype dtype, Op op) override {
    rendezvous_.check_usable("all_reduce");
    ZT_CHECK(numel >= 0, CommError, "all_reduce of ", numel, " elements");
    if (size_ == 1 || numel == 0) return;
    const int64_t element_bytes = dtype_bytes(dtype);
    auto* bytes = static_cast<char*>(data);
    const void* srcs[kMaxMembers];
    if (numel * element_bytes <= std::min(kSmallAllReduceBytes, slot_bytes_)) {
      const int set = next_set();
      copy_bytes(segment_.slot(set, rank_), data, numel * element_bytes);
      rendezvous_.arrive_and_wait("all_reduce");
      for (int m = 0; m < size_; ++m) srcs[m] = m == rank_ ? data : segment_.slot(set, m);
      reduce(dtype, op, data, srcs, size_, numel);
      return;
    }
    const int64_t round_numel = slot_bytes_ / element_bytes;
    for (int64_t offset = 0; offset < numel; offset += round_numel) {
      const int64_t n = std::min(round_numel, numel - offset);
      char* mine = bytes + offset * element_bytes;
      const auto [begin, end] = share_of(rank_, size_, n, element_bytes);
      const int set = next_set();
      // Only the others' shares go to the slot: this member reads its own from `data`.
      char* slot = segment_.slot(set, rank_);
      copy_bytes(slot, mine, begin * element_bytes);
      copy_bytes(slot + end * element_bytes, mine + end * element_bytes, (n - end) * element_bytes);
      rendezvous_.arrive_and_wait("all_reduce");
      char* result = segment_.result(set);
      if (end > begin) {
        for (int m = 0; m < size_; ++m) srcs[m] = (m == rank_ ? mine : segment_.slot(set, m)) + begin * element_bytes;
        // In place into `data`, and into the result area for the others.
        reduce(dtype, op, mine + begin * element_bytes, srcs, size_, end - begin, result + begin * element_bytes);
      }
      rendezvous_.arrive_and_wait("all_reduce");
      copy_bytes(mine, result, begin * element_bytes);
      copy_bytes(mine + end * element_bytes, result + end * element_bytes, (n - end) * element_bytes);
    }
  }

  void reduce_scatter(const void* input, void* output, int64_t chunk_numel, Dtype dtype, Op op) override {
    rendezvous_.check_usable("reduce_scatter");
    ZT_CHECK(chunk_numel >= 0, CommError, "reduce_scatter of chunks of ", chunk_numel, " elements");
    const int64_t element_bytes = dtype_bytes(dtype);
    const auto* in = static_cast<const char*>(input);
    auto* out = static_cast<char*>(output);
    const int64_t chunk_bytes = chunk_numel * element_bytes;
    if (size_ == 1) {
      if (chunk_numel > 0) copy_bytes(output, input, chunk_bytes);
      return;
    }
    // Each slot holds one piece per member, at cache-line-aligned offsets.
    const int64_t piece_bytes = slot_bytes_ / size_ / kCacheLine * kCacheLine;
    const int64_t piece_numel = piece_bytes / element_bytes;
    const void* srcs[kMaxMembers];
    for (int64_t offset = 0; offset < chunk_numel; offset += piece_numel) {
      const int64_t n = std::min(piece_numel, chunk_numel - offset);
      const int set = next_set();
      char* slot = segment_.slot(set, rank_);
      for (int c = 0; c < size_; ++c) {
        if (c == rank_) continue;   // nobody else reads the own chunk's piece
        copy_bytes(slot + c * piece_bytes, in + c * chunk_bytes + offset * element_bytes, n * element_bytes);
      }
      rendezvous_.arrive_and_wait("reduce_scatter");
      for (int m = 0; m < size_; ++m) {
        srcs[m] = m == rank_ ? in + rank_ * chunk_bytes + offset * element_bytes
                             : segment_.slot(set, m) + rank_ * piece_bytes;
      }
      reduce(dtype, op, out + offset * element_bytes, srcs, size_, n);
    }
  }

  void all_gather(const void* input, void* output, int64_t chunk_bytes) override {
    rendezvous_.check_usable("all_gather");
    ZT_CHECK(chunk_bytes >= 0, CommError, "all_gather of chunks of ", chunk_bytes, " bytes");
    const auto* in = static_cast<const char*>(input);
    auto* out = static_cast<char*>(output);
    if (size_ == 1) {
      if (chunk_bytes > 0 && out != in) copy_bytes(out, in, chunk_bytes);
      return;
    }
    for (int64_t offset = 0; offset < chunk_bytes; offset += slot_bytes_) {
      const int64_t n = std::min(slot_bytes_, chunk_bytes - offset);
      const int set = next_set();
      copy_bytes(segment_.slot(set, rank_), in + offset, n);
      rendezvous_.arrive_and_wait("all_gather");
      for (int m = 0; m < size_; ++m) {
        char* to = out + m * chunk_bytes + offset;
        const char* from = m == rank_ ? in + offset : segment_.slot(set, m);
        // The input may be the own part of the output (an in-place all_gather).
        if (to != from) copy_bytes(to, from, n);
      }
    }
  }

  void broadcast(void* data, int64_t nbytes, int root) override {
    rendezvous_.check_usable("broadcast");
    ZT_CHECK(root >= 0 && root < size_, CommError, "broadcast from member ", root, " of ", size_);
    ZT_CHECK(nbytes >= 0, CommError, "broadcast of ", nbytes, " bytes");
    if (size_ == 1) return;
    auto* bytes = static_cast<char*>(data);
    for (int64_t offset = 0; offset < nbytes; offset += slot_bytes_) {
      const int64_t n = std::min(slot_bytes_, nbytes - offset);
      const int set = next_set();
      if (rank_ == root) copy_bytes(segment_.slot(set, root), bytes + offset, n);
      rendezvous_.arrive_and_wait("broadcast");
      if (rank_ != root) copy_bytes(bytes + offset, segment_.slot(set, root), n);
    }
  }

  void barrier() override {
    rendezvous_.check_usable("barrier");
    rendezvous_.arrive_and_wait("barrier");
  }

 private:
  int next_set() { return static_cast<int>(round_++ & 1); }

  Segment segment_;
  Rendezvous rendezvous_;
  const int rank_;
  const int size_;
  const int64_t slot_bytes_;
  int64_t round_ = 0;   // rounds so far, over all operations: picks the buffer set
};

}  // namespace

std::unique_ptr<LocalGroup> LocalGroup::join(const Exchange& exchange, int rank, int size,
                                             const LocalGroupOptions& options) {
  ZT_CHECK(options.job_ranks.empty() || options.job_ranks.size() == static_cast<size_t>(size), CommError,
           "shared-memory group: ", options.job_ranks.size(), " job ranks for ", size, " members");
  ZT_CHECK(options.timeout.count() > 0, CommError, "shared-memory group: timeout of ", options.timeout.count(), " ms");
  WaitOptions wait_options;
  wait_options.timeout = options.timeout;
  Segment segment = Segment::join(exchange, rank, size, options.slot_bytes, options.job_ranks, options.timeout);
  auto group = std::make_unique<ShmLocalGroup>(std::move(segment), rank, options, wait_options);
  group->join_barrier();
  return group;
}

}  // namespace zerotrain::comm::shm
