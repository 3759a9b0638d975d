// zerotrain::comm::Communicator: the one door to collectives. The engine never calls a
// communication library directly.
//
//   auto comm = comm::Communicator::init();            // rendezvous from the environment
//   comm.all_reduce(grads, comm::ReduceOp::kAvg).wait();
//   comm.reduce_scatter(bucket, my_chunk).wait();      // my_chunk: chunk_range(bucket.numel(), ws, rank)
//
// Counts always come from the tensors. Every call returns a Work (the threads backend
// completes the operation while issuing it); collectives must be issued in the same order
// on every rank (each gets the same sequence number there). Argument errors, and with
// check_fingerprints a mismatch or a timeout of the check, are thrown by the call itself;
// everything else by Work::wait().
// A Communicator is a handle (copies share one connection) used from one thread at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/comm/types.h"
#include "zerotrain/comm/work.h"

namespace zerotrain::config {
struct Config;
}

namespace zerotrain::comm {

// The options a ds_config's "comm" block asks for (before the environment's overrides).
CommOptions options_from_config(const config::Config& config);

namespace detail {
struct CommState;
class Backend;
}

class Communicator {
 public:
  // Joins the job described by the environment (rendezvous/rendezvous.h) with
  // options.backend (after apply_env). With no launcher environment this is a world of one.
  static Communicator init(CommOptions options = {});
  // Joins the job described by `where` (for callers that have their own rendezvous).
  static Communicator init(const RendezvousInfo& where, CommOptions options = {});
  // world_size communicators whose ranks are threads of this process: use rank r's
  // communicator only from rank r's thread. For tests and for stage logic at any world size.
  static std::vector<Communicator> make_thread_world(int world_size, CommOptions options = {});
  // Over a backend made outside init (comm/process_group/process_group.h adopts a c10d
  // process group).
  static Communicator from_backend(std::unique_ptr<detail::Backend> backend, CommOptions options);

  int rank() const;
  int world_size() const;
  BackendKind backend() const;
  const CommOptions& options() const;
  // How many collectives this communicator has issued (the last sequence number).
  int64_t issued() const;

  // In place on every rank. kAvg of an integer tensor truncates toward zero.
  [[nodiscard]] Work all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  // output gets this rank's chunk of the reduction of `input` over all ranks:
  // output.numel() == chunk_range(input.numel(), world_size, rank).numel.
  [[nodiscard]] Work reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op = ReduceOp::kSum);
  // output (flat, numel N) gets every rank's chunk; input is this rank's
  // chunk_range(N, world_size, rank). The inverse of reduce_scatter's layout.
  [[nodiscard]] Work all_gather(const at::Tensor& input, const at::Tensor& output);
  [[nodiscard]] Work broadcast(const at::Tensor& tensor, int root);
  [[nodiscard]] Work barrier();

  // Many tensors in buckets of CommOptions::bucket_nbytes: one collective per bucket
  // instead of one per tensor. Same results as calling the plain form on each tensor;
  // all tensors of a reduce_scatter/all_gather call share one dtype.
  [[nodiscard]] Work all_reduce_coalesced(const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::kSum);
  [[nodiscard]] Work reduce_scatter_coalesced(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                                ReduceOp op = ReduceOp::kSum);
  [[nodiscard]] Work all_gather_coalesced(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);

  // What this communicator composes from other collectives on its backend, for `report`.
  std::vector<std::string> composed_paths() const;

 private:
  explicit Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace zerotrain::comm
