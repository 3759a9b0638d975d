// Where offload keeps a group's fp32 master weights and Adam moments between steps: in host
// memory (`offload_optimizer.device: cpu`) or in files on a disk (`nvme`). The step walks
// the shard one sub-group at a time (`sub_group_size` elements); a store hands out each
// sub-group's arrays in turn, reading ahead and writing behind as its pipeline allows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/io/io_engine.h"

namespace zerotrain::offload {

// `numel` elements of group `group`'s shard from `offset`.
struct SubGroup {
  std::size_t group = 0;
  int64_t offset = 0;
  int64_t numel = 0;
};

// A sub-group's three arrays, in memory while it is stepped.
struct SubGroupArrays {
  float* master = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
};

// A group's states whole, in memory (checkpoints).
struct GroupStates {
  at::Tensor master, exp_avg, exp_avg_sq;   // fp32, the shard's numel
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Group `group` has `numel` elements; `fill(offset, n, out)` writes its initial master
  // weights [offset, offset + n) as fp32 into `out`, a piece at a time, so that the whole
  // master never has to be in memory. Its moments start at zero. Groups are added in
  // order, before any step.
  using MasterFill = std::function<void(int64_t offset, int64_t numel, float* out)>;
  virtual void add_group(std::size_t group, int64_t numel, const MasterFill& fill) = 0;

  // One pass over `order` (a step): acquire(k) returns sub-group k's arrays once they are in
  // memory, release(k) hands them back (to be written), finish() waits until every write is
  // on disk. Sub-groups are acquired and released in order, one at a time.
  virtual void begin_pass(std::vector<SubGroup> order) = 0;
  virtual SubGroupArrays acquire(std::size_t k) = 0;
  virtual void release(std::size_t k) = 0;
  // Hands sub-group k back without writing it: its arrays were only read.
  virtual void release_unchanged(std::size_t k) = 0;
  virtual void finish_pass() = 0;

  // A group's states whole in memory, and back (checkpoints save and load them).
  virtual GroupStates read_group(std::size_t group) = 0;
  virtual void write_group(std::size_t group, const GroupStates& states) = 0;
  // Whether read_group hands out the store's own tensors (host memory): then writing into
  // them is writing the store.
  virtual bool resident() const = 0;
  // Elements [offset, offset + numel) of array `which` (0 master, 1 exp_avg, 2 exp_avg_sq)
  // of group `group` into `out`, through the store's own buffers: a save streams the states
  // from here without holding a group whole. Between passes only.
  virtual void read_range(std::size_t group, int which, int64_t offset, int64_t numel, float* out) = 0;
  // The reverse: `numel` elements from `in` into array `which` of group `group` from
  // `offset`, through the store's own buffers (a load streams the states in this way);
  // flush_writes() puts what is still buffered on disk. Between passes only.
  virtual void write_range(std::size_t group, int which, int64_t offset, int64_t numel, const float* in) = 0;
  virtual void flush_writes() = 0;

  // Bytes held in host memory (states and buffers) and on disk.
  virtual int64_t host_nbytes() const = 0;
  virtual int64_t disk_nbytes() const = 0;
  virtual std::string describe() const = 0;   // for the start-up log
};

// Host memory: the arrays are the tensors themselves; nothing is copied.
std::unique_ptr<StateStore> make_host_store(bool pin_memory);

struct NvmeStoreOptions {
  std::string dir;                   // this rank's folder under nvme_path (created; emptied of our files)
  io::AioOptions aio;
  int64_t max_sub_group_numel = 0;   // the largest sub-group: the size of each buffer
  int64_t buffer_sets = 1;           // sub-groups in memory at once: read ahead and written behind
  bool pipeline_read = false;        // read the next sub-groups while one is stepped
  bool pipeline_write = false;       // write a stepped sub-group while the next is stepped
};
std::unique_ptr<StateStore> make_nvme_store(const NvmeStoreOptions& options);

}  // namespace zerotrain::offload
