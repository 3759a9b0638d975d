// The interface each backend implements, and what backends share. Internal to comm/: users go
// through Communicator, which checks arguments, numbers the collectives, checks
// fingerprints, and composes what a backend lacks (uneven chunks, dtypes it cannot
// reduce, averages) before calling in here.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "zerotrain/comm/progress.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/comm/types.h"
#include "zerotrain/comm/work.h"

namespace c10d {
class Store;
}

namespace zerotrain::comm::detail {

using WorkPtr = std::shared_ptr<WorkImpl>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Tensors are contiguous and the Communicator has checked them:
  //   all_reduce:     in place; `op` is kAvg only when averages(dtype);
  //   reduce_scatter: input (world_size * n,), output (n,);
  //   all_gather:     input (n,), output (world_size * n,);
  // and reductions come only in dtypes for which reduces(dtype) is true.
  virtual WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) = 0;
  virtual WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) = 0;
  virtual WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) = 0;
  virtual WorkPtr broadcast(const at::Tensor& tensor, int root) = 0;
  virtual WorkPtr barrier() = 0;

  virtual bool reduces(at::ScalarType dtype) const = 0;
  virtual bool averages(at::ScalarType dtype) const = 0;

  virtual ProgressBoard& progress() = 0;
  // The device on which the Communicator's own small exchanges (the fingerprints) run for a
  // collective whose tensors are on `tensors_on` (a barrier passes kCPU). Gloo, MPI and the
  // threads backend move tensors of any device; NCCL moves only CUDA tensors of its own GPU.
  virtual at::Device exchange_device(at::Device tensors_on) const { return tensors_on; }
  // Called after a timeout or a transport error: the backend must not block process exit
  // waiting for peers that will never answer (Gloo's worker threads, MPI_Finalize).
  virtual void abandon() {}

  // The job's rendezvous store, where layers above this backend meet (the shared-memory
  // groups); null when there is none. Owned by the backend.
  virtual c10d::Store* store() { return nullptr; }
  // A backend of the same transport over `members` (ranks of this backend, ascending), in
  // which member i has rank i. Collective over this backend: every rank calls it with the
  // same members and `tag` (unique among this backend's subgroups); ranks outside `members`
  // get null.
  virtual std::unique_ptr<Backend> subgroup(const std::vector<int>& members, const std::string& tag);
};

// An average a transport cannot take: its sum (in `t`) divided by the world size, integers
// truncated, as every backend gives them.
void divide_in_place(const at::Tensor& t, int world_size);
// Whether the collectives reduce `dtype`: floating point and integers, not bool or complex.
bool is_reducible(at::ScalarType dtype);

// Whether two tensors share any byte of memory (MPI forbids overlapping send and receive buffers).
inline bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The first line of an exception's message (c10's carry a stack trace after it).
inline std::string first_line(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

}  // namespace zerotrain::comm::detail
