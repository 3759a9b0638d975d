// The Backend over shared memory: the ranks of each host form a LocalGroup (local_group.h),
// and when the job spans hosts, one rank per host (its leader, the lowest rank there)
// crosses the job's own transport (Gloo or MPI) in a subgroup of the leaders:
//   all_reduce:     reduce on the host, all_reduce across leaders, broadcast on the host;
//   all_gather:     gather on the host, all_gather of host blocks across leaders,
//                   broadcast on the host;
//   reduce_scatter: on one host, the LocalGroup's own; across hosts, the all_reduce above
//                   followed by taking this rank's chunk;
//   broadcast:      on the root's host, then across leaders, then on the other hosts.
// Collectives complete while they are issued, on the calling thread: the copies and
// reductions are the work, and no thread is left spinning between them.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <map>

#include "zerotrain/comm/collective_work.h"
#include "zerotrain/comm/shm/host_identity.h"
#include "zerotrain/comm/shm/local_group.h"
#include "zerotrain/comm/shm/shm_backend.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {
namespace {

std::optional<shm::Dtype> shm_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return shm::Dtype::kFloat32;
    case at::kDouble: return shm::Dtype::kFloat64;
    case at::kHalf: return shm::Dtype::kFloat16;
    case at::kBFloat16: return shm::Dtype::kBFloat16;
    case at::kInt: return shm::Dtype::kInt32;
    case at::kLong: return shm::Dtype::kInt64;
    case at::kByte: return shm::Dtype::kUInt8;
    case at::kChar: return shm::Dtype::kInt8;
    default: return std::nullopt;
  }
}

shm::Op shm_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return shm::Op::kSum;
    case ReduceOp::kAvg: return shm::Op::kAvg;
    case ReduceOp::kMax: return shm::Op::kMax;
  }
  return shm::Op::kSum;
}

std::string to_text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> to_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// Which ranks share a host: host h's ranks in ascending order, h numbered by first rank.
struct HostLayout {
  std::vector<std::vector<int>> hosts;
  std::vector<int> host_of;   // by rank
  std::vector<int> index_of;  // a rank's position among its host's ranks

  static HostLayout of(const std::vector<std::string>& identity_by_rank) {
    HostLayout layout;
    std::map<std::string, int> host_by_identity;
    for (size_t r = 0; r < identity_by_rank.size(); ++r) {
      auto [it, added] = host_by_identity.emplace(identity_by_rank[r], static_cast<int>(layout.hosts.size()));
      if (added) layout.hosts.emplace_back();
      layout.host_of.push_back(it->second);
      layout.index_of.push_back(static_cast<int>(layout.hosts[it->second].size()));
      layout.hosts[it->second].push_back(static_cast<int>(r));
    }
    return layout;
  }
  size_t largest_host() const {
    size_t n = 0;
    for (const auto& h : hosts) n = std::max(n, h.size());
    return n;
  }
  std::vector<int> leaders() const {
    std::vector<int> out;
    for (const auto& h : hosts) out.push_back(h.front());
    std::sort(out.begin(), out.end());
    return out;
  }
};

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<Backend> world, HostLayout layout, std::unique_ptr<shm::LocalGroup> local,
             std::unique_ptr<Backend> cross, std::chrono::milliseconds timeout)
      : world_(std::move(world)), layout_(std::move(layout)), local_(std::move(local)), cross_(std::move(cross)),
        timeout_(timeout) {}

  BackendKind kind() const override { return BackendKind::kShm; }
  int rank() const override { return world_->rank(); }
  int world_size() const override { return world_->world_size(); }
  bool reduces(at::ScalarType dtype) const override {
    return shm_dtype(dtype).has_value() && (single_host() || world_->reduces(dtype));
  }
  // Across hosts an average is a sum divided once at the end, not an average of averages.
  bool averages(at::ScalarType dtype) const override { return single_host() && shm_dtype(dtype).has_value(); }
  ProgressBoard& progress() override { return world_->progress(); }
  c10d::Store* store() override { return world_->store(); }
  void abandon() override {
    world_->abandon();
    if (cross_) cross_->abandon();
  }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    if (!tensor.is_cpu()) return on_world(tensor, op);
    return run([&] { reduce_everywhere(tensor, op); });
  }

  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override {
    if (!input.is_cpu()) {
      if (op != ReduceOp::kAvg || world_->averages(input.scalar_type())) return world_->reduce_scatter(input, output, op);
      return run([&] {
        wait(world_->reduce_scatter(input, output, ReduceOp::kSum));
        divide_in_place(output, world_size());
      });
    }
    return run([&] {
      if (single_host()) {
        local_->reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(), *shm_dtype(input.scalar_type()),
                               shm_op(op));
        return;
      }
      at::Tensor all = input.clone();
      reduce_everywhere(all, op);
      output.copy_(all.narrow(0, rank() * output.numel(), output.numel()));
    });
  }

  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override {
    if (!input.is_cpu()) return world_->all_gather(input, output);
    return run([&] {
      const int64_t chunk_bytes = static_cast<int64_t>(input.nbytes());
      if (single_host()) {
        local_->all_gather(input.data_ptr(), output.data_ptr(), chunk_bytes);
        return;
      }
      gather_across_hosts(input, output);
    });
  }

  WorkPtr broadcast(const at::Tensor& tensor, int root) override {
    if (!tensor.is_cpu()) return world_->broadcast(tensor, root);
    return run([&] {
      const int64_t nbytes = static_cast<int64_t>(tensor.nbytes());
      if (single_host()) {
        local_->broadcast(tensor.data_ptr(), nbytes, root);
        return;
      }
      const int root_host = layout_.host_of[root];
      const bool on_root_host = my_host() == root_host;
      if (on_root_host) local_->broadcast(tensor.data_ptr(), nbytes, layout_.index_of[root]);
      if (cross_) wait(cross_->broadcast(tensor, root_host));
      if (!on_root_host) local_->broadcast(tensor.data_ptr(), nbytes, 0);
    });
  }

  WorkPtr barrier() override {
    return run([&] {
      local_->barrier();
      if (single_host()) return;
      if (cross_) wait(cross_->barrier());
      local_->barrier();
    });
  }

 private:
  bool single_host() const { return layout_.hosts.size() == 1; }
  int my_host() const { return layout_.host_of[rank()]; }

  // Tensors on a GPU (two ranks sharing one over gloo) take the job's own transport: shared
  // memory holds host bytes only. An average it cannot take is its sum, divided here (the
  // Communicator counted on averages(), which is about host bytes; reduce_scatter does the same).
  WorkPtr on_world(const at::Tensor& tensor, ReduceOp op) {
    if (op != ReduceOp::kAvg || world_->averages(tensor.scalar_type())) return world_->all_reduce(tensor, op);
    return run([&] {
      wait(world_->all_reduce(tensor, ReduceOp::kSum));
      divide_in_place(tensor, world_size());
    });
  }

  // Runs a collective to completion; its error (a timeout included) is the Work's.
  template <class Body>
  WorkPtr run(Body&& body) {
    try {
      body();
      return std::make_shared<DoneWork>();
    } catch (...) {
      return std::make_shared<FailedWork>(std::current_exception());
    }
  }

  void wait(const WorkPtr& work) const {
    if (!work->wait_until(WorkImpl::Clock::now() + timeout_)) {
      throw TimeoutError(str("the exchange between hosts did not finish within ", timeout_.count() / 1000.0, " s"));
    }
  }

  void reduce_everywhere(const at::Tensor& tensor, ReduceOp op) {
    const shm::Dtype dtype = *shm_dtype(tensor.scalar_type());
    if (single_host()) {
      local_->all_reduce(tensor.data_ptr(), tensor.numel(), dtype, shm_op(op));
      return;
    }
    ZT_INTERNAL_ASSERT(op != ReduceOp::kAvg, "averages across hosts are sums divided by the Communicator");
    local_->all_reduce(tensor.data_ptr(), tensor.numel(), dtype, shm_op(op));
    if (cross_) wait(cross_->all_reduce(tensor, op));
    local_->broadcast(tensor.data_ptr(), static_cast<int64_t>(tensor.nbytes()), 0);
  }

  // Every host's chunks gathered on the host, then host blocks (padded to the largest host)
  // across the leaders, put in rank order by each leader, then shared on the host.
  void gather_across_hosts(const at::Tensor& input, const at::Tensor& output) {
    const int64_t n = input.numel();
    const auto widest = static_cast<int64_t>(layout_.largest_host());
    at::Tensor block = at::zeros({widest * n}, input.options());
    local_->all_gather(input.data_ptr(), block.data_ptr(), static_cast<int64_t>(input.nbytes()));
    if (cross_) {
      at::Tensor blocks = at::empty({static_cast<int64_t>(layout_.hosts.size()) * widest * n}, input.options());
      wait(cross_->all_gather(block, blocks));
      for (size_t h = 0; h < layout_.hosts.size(); ++h) {
        const auto& ranks = layout_.hosts[h];
        for (size_t j = 0; j < ranks.size(); ++j) {
          output.narrow(0, ranks[j] * n, n).copy_(blocks.narrow(0, (static_cast<int64_t>(h) * widest + j) * n, n));
        }
      }
    }
    local_->broadcast(output.data_ptr(), static_cast<int64_t>(output.nbytes()), 0);
  }

  std::unique_ptr<Backend> world_;
  HostLayout layout_;
  std::unique_ptr<shm::LocalGroup> local_;
  std::unique_ptr<Backend> cross_;   // the leaders' subgroup, on leaders of a multi-host job
  std::chrono::milliseconds timeout_;
};

// The store's get() under our deadline, its failure as a TimeoutError naming the key.
std::string store_get(c10d::Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  try {
    store.wait({key}, timeout);
    return to_text(store.get(key));
  } catch (const std::exception& e) {
    throw TimeoutError(str("shared memory: '", key, "' was not published within ", timeout.count() / 1000.0,
                           " s (", first_line(e), ")"));
  }
}

}  // namespace

std::unique_ptr<Backend> make_shm_backend(std::unique_ptr<Backend> world, const CommOptions& options, bool required) {
  c10d::Store* store = world->store();
  if (store == nullptr) {
    ZT_CHECK(!required, ConfigError, "comm.backend \"shm\": the ", to_string(world->kind()),
             " backend has no rendezvous store for the shared-memory groups to meet in");
    return world;
  }
  const int rank = world->rank();
  const int ws = world->world_size();
  // A number shared by the ranks of this communicator and no earlier one on the same store
  // (torchrun's store outlives a communicator): the n-th join on every rank adds n.
  const int64_t generation = (store->add("zt/shm/joins", 1) - 1) / ws;
  const std::string prefix = str("zt/shm/", generation, "/");
  store->set(str(prefix, "host/", rank), to_bytes(shm::host_identity(rank)));
  std::vector<std::string> identities;
  for (int r = 0; r < ws; ++r) identities.push_back(store_get(*store, str(prefix, "host/", r), options.timeout));
  HostLayout layout = HostLayout::of(identities);
  if (layout.largest_host() < 2) {
    ZT_CHECK(!required, ConfigError, "comm.backend \"shm\": no two of the ", ws,
             " ranks share a host, so there is no shared memory to use; use gloo or mpi, or start several ranks "
             "per host (--nproc_per_node)");
    if (rank == 0) ZT_LOG_DEBUG("comm: one rank per host; shared memory not used");
    return world;
  }
  const int host = layout.host_of[rank];
  const auto& members = layout.hosts[host];
  shm::LocalGroupOptions local_options;
  local_options.timeout = options.timeout;
  local_options.job_ranks = members;
  const std::string local_prefix = str(prefix, "group/", host, "/");
  shm::Exchange exchange{
      [store, local_prefix](const std::string& key, const std::string& value) {
        store->set(local_prefix + key, to_bytes(value));
      },
      [store, local_prefix, timeout = options.timeout](const std::string& key) {
        return store_get(*store, local_prefix + key, timeout);
      }};
  auto local = shm::LocalGroup::join(exchange, layout.index_of[rank], static_cast<int>(members.size()), local_options);
  std::unique_ptr<Backend> cross;
  if (layout.hosts.size() > 1) cross = world->subgroup(layout.leaders(), str("shm", generation, "-leaders"));
  if (rank == 0) {
    ZT_LOG_INFO("comm: shared memory between the ranks of each host (", layout.hosts.size(), layout.hosts.size() == 1 ?
                " host" : " hosts, leaders across over " + std::string(to_string(world->kind())), ")");
  }
  return std::make_unique<ShmBackend>(std::move(world), std::move(layout), std::move(local), std::move(cross),
                                      options.timeout);
}

}  // namespace zerotrain::comm::detail
