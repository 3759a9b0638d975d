// MPI (CPU) over OpenMPI: shared memory between ranks of one host, TCP between hosts.
// Needs the world that mpirun creates (`zerotrain launch --backend mpi` runs mpirun).
// Collectives are MPI's nonblocking ones; a Work polls MPI_Test until done or its deadline,
// so a stuck peer becomes a TimeoutError instead of a hang. MPI has no fp16/bf16 types:
// the Communicator reduces those in fp32 and moves them as bytes otherwise.
#include <mpi.h>

#include <ATen/ATen.h>

#include <stdlib.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <climits>
#include <thread>

#include "zerotrain/comm/mpi/mpi_backend.h"
#include "zerotrain/comm/rendezvous/store.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

void check_mpi(int code, const char* what) {
  ZT_CHECK(code == MPI_SUCCESS, CommError, what, " failed: ", mpi_error_text(code));
}

MPI_Datatype mpi_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  ZT_INTERNAL_ASSERT(op != ReduceOp::kAvg, "MPI has no average; the Communicator divides a sum");
  return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM;
}

int count_of(int64_t n, const char* what) {
  ZT_CHECK(n <= INT_MAX, NotSupported, what, " of ", n, " elements: the MPI backend moves at most ", INT_MAX,
           " per call; use smaller buckets (CommOptions::bucket_nbytes)");
  return static_cast<int>(n);
}

// Buffers of requests that were abandoned before they completed: MPI may still write to
// them, so they live until the process exits.
std::vector<at::Tensor>& graveyard() {
  static auto* buffers = new std::vector<at::Tensor>();
  return *buffers;
}

class MpiWork final : public WorkImpl {
 public:
  // `buffers`: the tensors MPI reads and writes; held until the request completes.
  MpiWork(MPI_Request request, const char* what, std::vector<at::Tensor> buffers)
      : request_(request), what_(what), buffers_(std::move(buffers)) {}
  ~MpiWork() override {
    // An active collective request may not be freed, and MPI still owns its buffers.
    if (!done_) {
      for (auto& t : buffers_) graveyard().push_back(std::move(t));
    }
  }

  bool wait_until(Clock::time_point deadline) override {
    // Spin briefly (small messages finish in microseconds), then back off so that ranks
    // sharing a core with their peers do not starve them.
    for (int spins = 0; !test(); ++spins) {
      if (Clock::now() >= deadline) return false;
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(spins < 1024 ? 20 : 200));
      }
    }
    return true;
  }
  bool is_completed() override { return test(); }

 private:
  bool test() {
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    check_mpi(MPI_Test(&request_, &flag, &status), what_);
    done_ = flag != 0;
    return done_;
  }

  MPI_Request request_;
  const char* what_;
  std::vector<at::Tensor> buffers_;
  bool done_ = false;
};

// At exit: MPI_Finalize after a clean exit (status 0). After a failure (a non-zero exit
// status, or a collective that timed out or failed) MPI_Abort instead: MPI_Finalize waits
// for every peer, so a failed rank would sit there until the others time out, while
// MPI_Abort makes mpirun stop the whole job at once with this rank's code.
bool g_initialized_here = false;
bool g_abandoned = false;
void at_exit(int status, void*) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!g_initialized_here || finalized) return;
  if (status == 0 && !g_abandoned) {
    MPI_Finalize();
  } else {
    MPI_Abort(MPI_COMM_WORLD, status == 0 ? 1 : status);
  }
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(const RendezvousInfo& where, const CommOptions& options) {
    // MPI_Init and the first collectives block without a timeout. When the launcher gave a
    // master address (zerotrain launch always does), meet there first, with one.
    c10::intrusive_ptr<c10d::Store> store;
    if (!where.master_addr.empty() && where.master_port > 0) {
      store = connect_store(master_store_address(where), where.rank, where.world_size, options.timeout);
      wait_for_ranks(*store, where.rank, where.world_size, options.timeout, "the mpi backend");
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      g_initialized_here = true;
      ::on_exit(at_exit, nullptr);
    }
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_size_);
    ZT_CHECK(world_size_ == where.world_size, ConfigError, "MPI reports a world of ", world_size_,
             " but the environment says ", where.world_size, "; start the job with mpirun -np ", where.world_size);
    if (!store) store = store_over_mpi(options, where.local_world_size < where.world_size);
    store_ = store;
    board_ = make_store_board(store, rank_, world_size_);
  }

  // Member of a subgroup: `comm` from MPI_Comm_split, and a board of its own in the parent's
  // store under a prefix (the shared-memory backend names missing ranks from the job's).
  MpiBackend(MPI_Comm comm, c10::intrusive_ptr<c10d::Store> store, int board_rank, int board_size) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_size_);
    store_ = store;
    board_ = make_store_board(std::move(store), board_rank, board_size);
  }

  c10d::Store* store() override { return store_.get(); }

  // MPI_Comm_split is collective over this communicator: every rank calls it.
  std::unique_ptr<Backend> subgroup(const std::vector<int>& members, const std::string& tag) override {
    const auto me = std::find(members.begin(), members.end(), rank_);
    const int color = me == members.end() ? MPI_UNDEFINED : 0;
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, rank_, &sub), "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return nullptr;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("zt/mpi/" + tag, store_);
    return std::make_unique<MpiBackend>(sub, prefixed, static_cast<int>(me - members.begin()),
                                        static_cast<int>(members.size()));
  }

  // Plain mpirun, no master address: rank 0 serves the progress store on a free port and
  // tells the others where it is over MPI itself; on loopback when every rank is on its host.
  c10::intrusive_ptr<c10d::Store> store_over_mpi(const CommOptions& options, bool spans_hosts) {
    char self[256] = "127.0.0.1";
    if (spans_hosts) gethostname(self, sizeof(self) - 1);
    StoreAddress address{self, 0, spans_hosts};
    c10::intrusive_ptr<c10d::Store> store;
    if (rank_ == 0) {
      store = connect_store(address, 0, world_size_, options.timeout);
      address.port = store_port(store);
    }
    char host[256] = {};
    std::snprintf(host, sizeof(host), "%s", address.host.c_str());
    check_mpi(MPI_Bcast(host, sizeof(host), MPI_CHAR, 0, comm_), "MPI_Bcast of the store address");
    check_mpi(MPI_Bcast(&address.port, 1, MPI_INT, 0, comm_), "MPI_Bcast of the store port");
    address.host = host;
    if (rank_ != 0) store = connect_store(address, rank_, world_size_, options.timeout);
    return store;
  }

  BackendKind kind() const override { return BackendKind::kMpi; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  bool reduces(at::ScalarType dtype) const override { return mpi_type(dtype) != MPI_DATATYPE_NULL; }
  bool averages(at::ScalarType) const override { return false; }
  ProgressBoard& progress() override { return *board_; }
  void abandon() override { g_abandoned = true; }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), count_of(tensor.numel(), "all_reduce"),
                             mpi_type(tensor.scalar_type()), mpi_op(op), comm_, &request),
              "MPI_Iallreduce");
    return std::make_shared<MpiWork>(request, "MPI_Iallreduce", std::vector<at::Tensor>{tensor});
  }
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override {
    // The Communicator never passes an output that overlaps the input (MPI forbids it).
    MPI_Request request;
    check_mpi(MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(), count_of(output.numel(), "reduce_scatter"),
                                        mpi_type(input.scalar_type()), mpi_op(op), comm_, &request),
              "MPI_Ireduce_scatter_block");
    return std::make_shared<MpiWork>(request, "MPI_Ireduce_scatter_block", std::vector<at::Tensor>{input, output});
  }
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override {
    MPI_Request request;
    const int64_t nbytes64 = input.numel() * static_cast<int64_t>(input.element_size());
    const int nbytes = count_of(nbytes64, "all_gather bytes");
    // ZeRO gathers into the flat buffer its own chunk lives in: that is MPI_IN_PLACE.
    const auto* own = static_cast<const char*>(output.data_ptr()) + rank_ * nbytes64;
    const void* send = input.data_ptr() == own ? MPI_IN_PLACE : input.data_ptr();
    const at::Tensor source = (send != MPI_IN_PLACE && overlaps(input, output)) ? input.clone() : input;
    if (send != MPI_IN_PLACE) send = source.data_ptr();
    check_mpi(MPI_Iallgather(send, nbytes, MPI_BYTE, output.data_ptr(), nbytes, MPI_BYTE, comm_, &request),
              "MPI_Iallgather");
    return std::make_shared<MpiWork>(request, "MPI_Iallgather", std::vector<at::Tensor>{source, output});
  }
  WorkPtr broadcast(const at::Tensor& tensor, int root) override {
    MPI_Request request;
    const int nbytes = count_of(tensor.numel() * static_cast<int64_t>(tensor.element_size()), "broadcast bytes");
    check_mpi(MPI_Ibcast(tensor.data_ptr(), nbytes, MPI_BYTE, root, comm_, &request), "MPI_Ibcast");
    return std::make_shared<MpiWork>(request, "MPI_Ibcast", std::vector<at::Tensor>{tensor});
  }
  WorkPtr barrier() override {
    MPI_Request request;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    return std::make_shared<MpiWork>(request, "MPI_Ibarrier", std::vector<at::Tensor>{});
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_size_ = 1;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<ProgressBoard> board_;
};

}  // namespace

bool mpi_compiled() { return true; }

std::unique_ptr<Backend> make_mpi_backend(const RendezvousInfo& where, const CommOptions& options) {
  ZT_CHECK(where.source == LaunchSource::kOpenMpi, ConfigError,
           "the mpi backend needs the world that mpirun creates, but this process was started by ",
           to_string(where.source), "; start it with `zerotrain launch --backend mpi ...` or `mpirun -np N ...`, "
           "or choose the gloo backend");
  return std::make_unique<MpiBackend>(where, options);
}

}  // namespace zerotrain::comm::detail
