// The shared segment of a LocalGroup: a memfd that member 0 creates and hands to the others
// over an abstract Unix socket, and the layout inside it.
//
// Why a memfd passed by SCM_RIGHTS: it has no name in any filesystem (nothing to clean up
// after a crash, nothing another user can open), and the socket's abstract name disappears
// with its last descriptor. Whoever connects must send the secret that member 0 published in
// the job's store, and run as the same user (SO_PEERCRED).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/comm/shm/local_group.h"

namespace zerotrain::comm::shm {

// The memfd's name (in /proc/<pid>/fd and maps, as "memfd:<name> (deleted)") is this prefix
// and the hex of the group's random socket name.
inline constexpr const char* kSegmentNamePrefix = "zerotrain-shm-";
// The Exchange key under which member 0 publishes "<socket name hex> <secret hex>".
inline constexpr const char* kSegmentExchangeKey = "shm_segment";
inline constexpr int kMaxMembers = 64;

// Each member's signal counter on a cache line of its own: a store by one member does not
// invalidate the line another member polls for a different counter.
struct alignas(64) MemberLine {
  std::atomic<uint64_t> arrived{0};   // how many waits this member has reached
};

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t size;
  uint32_t layout_version;
  int64_t slot_bytes;
  int64_t total_bytes;
  // Every signal bumps the word; sleepers count those in futex_wait, so a signal makes the
  // wake system call only when someone sleeps.
  alignas(64) std::atomic<uint32_t> futex_word{0};
  std::atomic<uint32_t> sleepers{0};
  // 0 while the group works; else a BrokenKind, with the reason once reason_ready is set.
  alignas(64) std::atomic<uint32_t> broken{0};
  std::atomic<uint32_t> reason_ready{0};
  char reason[480];
  alignas(64) std::atomic<int32_t> pids[kMaxMembers];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

enum class BrokenKind : uint32_t { kNone = 0, kComm = 1, kTimeout = 2 };

// Offsets inside the segment: the header, one MemberLine per member, then two buffer sets
// (alternating by round), each one slot per member and one result area, all slot_bytes.
struct SegmentLayout {
  int size = 0;
  int64_t slot_bytes = 0;
  int64_t lines_offset = 0;
  int64_t data_offset = 0;
  int64_t set_bytes = 0;
  int64_t total_bytes = 0;

  static SegmentLayout compute(int size, int64_t slot_bytes);
  int64_t slot_offset(int set, int member) const { return data_offset + set * set_bytes + member * slot_bytes; }
  int64_t result_offset(int set) const { return slot_offset(set, size); }
};

// A mapped segment; unmapped on destruction.
class Segment {
 public:
  // Member 0 creates the segment and hands it to the others, who receive it; both wait at
  // most `timeout`. Errors name what failed (with errno's text) and the member.
  static Segment join(const Exchange& exchange, int rank, int size, int64_t slot_bytes,
                      const std::vector<int>& job_ranks, std::chrono::milliseconds timeout);
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&&) = delete;
  Segment(const Segment&) = delete;
  ~Segment();

  const SegmentLayout& layout() const { return layout_; }
  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  MemberLine& line(int member) const {
    return reinterpret_cast<MemberLine*>(base_ + layout_.lines_offset)[member];
  }
  char* slot(int set, int member) const { return base_ + layout_.slot_offset(set, member); }
  char* result(int set) const { return base_ + layout_.result_offset(set); }
  // The memfd's name (tests look for it in /proc).
  const std::string& name() const { return name_; }

 private:
  Segment(char* base, SegmentLayout layout, std::string name) : base_(base), layout_(layout), name_(std::move(name)) {}
  char* base_ = nullptr;
  SegmentLayout layout_;
  std::string name_;
};

// "member 2 (job rank 5)": how messages name a member.
std::string member_label(int member, const std::vector<int>& job_ranks);

}  // namespace zerotrain::comm::shm
