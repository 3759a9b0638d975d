// Argument checks, sequence numbers, fingerprints and the compositions that make every
// backend offer the same collectives with the same results (docs/comm.md, "Compositions").
#include "zerotrain/comm/communicator.h"

#include <ATen/ATen.h>

#include "zerotrain/comm/coalesced.h"
#include "zerotrain/comm/collective_work.h"
#include "zerotrain/comm/mpi/mpi_backend.h"
#include "zerotrain/comm/shm/shm_backend.h"
#include "zerotrain/comm/threads/threads_backend.h"
#include "zerotrain/comm/transports.h"
#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm {
using ::zerotrain::detail::str;
namespace {

using detail::CollectiveWork;
using detail::CommState;
using detail::is_reducible;
using detail::WorkPtr;

enum class Kind : int64_t { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kBarrier };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce: return "all_reduce";
    case Kind::kReduceScatter: return "reduce_scatter";
    case Kind::kAllGather: return "all_gather";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kBarrier: return "barrier";
  }
  return "?";
}

// What a collective is, identical on every rank that issues it correctly.
struct Fingerprint {
  Kind kind = Kind::kBarrier;
  int64_t reduce_op = -1;
  int64_t dtype = -1;
  int64_t numel = 0;
  int64_t root = -1;

  std::string describe() const {
    std::string text = kind_name(kind);
    if (kind == Kind::kBarrier) return text + "()";
    text += str("(", c10::toString(static_cast<at::ScalarType>(dtype)), ", ", numel, " elements");
    if (reduce_op >= 0) text += str(", ", to_string(static_cast<ReduceOp>(reduce_op)));
    if (root >= 0) text += str(", root ", root);
    return text + ")";
  }
};
constexpr int64_t kFingerprintWords = 6;

void check_tensor(const at::Tensor& t, const char* what, const char* role) {
  ZT_CHECK(t.defined(), UsageError, what, ": the ", role, " tensor is undefined");
  ZT_CHECK(t.layout() == at::kStrided, NotSupported, what, ": the ", role,
           " tensor is sparse; collectives take dense tensors");
}

// A contiguous flat view of `t`, or a contiguous copy when `t` is not contiguous.
at::Tensor flat(const at::Tensor& t) { return t.contiguous().view(-1); }

void copy_back(const at::Tensor& dst, const at::Tensor& flat_src) {
  if (dst.is_contiguous() && dst.data_ptr() == flat_src.data_ptr()) return;
  dst.copy_(flat_src.view(dst.sizes()));
}

// What the coalesced collectives (coalesced.h) need of `comm`; they issue each bucket as one
// of its plain collectives.
detail::Coalescing coalescing_of(const Communicator& comm) {
  return {comm.rank(), comm.world_size(), comm.options().bucket_nbytes, comm.options().timeout};
}

}  // namespace

struct Issuer {
  std::shared_ptr<CommState> state;

  detail::Backend& backend() const { return *state->backend; }
  int ws() const { return state->backend->world_size(); }

  // Starts collective number ++seq: checks the communicator is usable, publishes progress,
  // and compares fingerprints across ranks when asked to.
  int64_t begin(const Fingerprint& fp, at::Device device = at::kCPU) const {
    ZT_CHECK(state->broken.empty(), CommError, fp.describe(), ": this communicator is unusable after an "
             "earlier failure (", state->broken, "); create a new one, or restart the job");
    const int64_t seq = ++state->seq;
    backend().progress().publish(seq, fp.describe());
    if (state->options.check_fingerprints) compare_fingerprints(seq, fp, backend().exchange_device(device));
    return seq;
  }

  void compare_fingerprints(int64_t seq, const Fingerprint& fp, at::Device device) const {
    // On the device the backend exchanges on (Backend::exchange_device): NCCL's GPU for NCCL.
    auto mine = at::tensor({seq, static_cast<int64_t>(fp.kind), fp.reduce_op, fp.dtype, fp.numel, fp.root}, at::kLong)
                    .to(device);
    auto all = at::empty({ws() * kFingerprintWords}, at::TensorOptions(at::kLong).device(device));
    WorkPtr part = backend().all_gather(mine, all);
    auto work = std::make_shared<CollectiveWork>(state, seq, "fingerprint check of " + fp.describe(),
                                                 std::vector<WorkPtr>{part}, nullptr);
    Work(work).wait(state->options.timeout);
    mine = mine.cpu();
    auto rows = all.cpu().view({ws(), kFingerprintWords});
    if (at::equal(rows, mine.expand({ws(), kFingerprintWords}))) return;
    std::string detail;
    for (int r = 0; r < ws(); ++r) {
      auto row = rows[r];
      Fingerprint theirs{static_cast<Kind>(row[1].item<int64_t>()), row[2].item<int64_t>(),
                         row[3].item<int64_t>(), row[4].item<int64_t>(), row[5].item<int64_t>()};
      detail += str("\n  rank ", r, ": #", row[0].item<int64_t>(), " ", theirs.describe());
    }
    state->mark_broken(str("fingerprint mismatch at collective #", seq));
    throw CommError(str("collective #", seq, ": the ranks issued different collectives (fingerprint check):", detail,
                        "\nEvery rank must issue the same collectives, with the same dtype and element count, "
                        "in the same order."));
  }

  Work finish(int64_t seq, const Fingerprint& fp, WorkPtr part, std::function<void()> done) const {
    return Work(std::make_shared<CollectiveWork>(state, seq, fp.describe(), std::vector<WorkPtr>{std::move(part)},
                                                 std::move(done)));
  }

  // `t` on the device the backend moves (NCCL: its GPU). A CPU tensor given to NCCL, such as
  // the Trainer's and the engine's small agreement checks, travels through the GPU: copied
  // there now, and back when the collective is waited for (copy_back crosses devices). A
  // tensor on another GPU is the caller's mistake, and the backend refuses it.
  at::Tensor staged(const at::Tensor& t) const {
    if (!t.is_cpu()) return t;
    const at::Device d = backend().exchange_device(t.device());
    return d == t.device() ? t : t.to(d);
  }

  Work all_reduce(const at::Tensor& tensor, ReduceOp op) const {
    check_tensor(tensor, "all_reduce", "");
    ZT_CHECK(is_reducible(tensor.scalar_type()), NotSupported, "all_reduce: dtype ", tensor.scalar_type(),
             " cannot be reduced; use a floating-point or integer tensor");
    const Fingerprint fp{Kind::kAllReduce, static_cast<int64_t>(op), static_cast<int64_t>(tensor.scalar_type()),
                         tensor.numel()};
    const int64_t seq = begin(fp, tensor.device());
    if (tensor.numel() == 0) return Work();
    at::Tensor buffer = staged(flat(tensor));
    if (!backend().reduces(buffer.scalar_type())) buffer = buffer.to(at::kFloat);
    const bool post_divide = op == ReduceOp::kAvg && !backend().averages(buffer.scalar_type());
    WorkPtr part = backend().all_reduce(buffer, post_divide ? ReduceOp::kSum : op);
    const int world = ws();
    return finish(seq, fp, part, [=] {
      if (post_divide) detail::divide_in_place(buffer, world);
      copy_back(tensor, buffer);
    });
  }

  Work reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) const {
    check_tensor(input, "reduce_scatter", "input");
    check_tensor(output, "reduce_scatter", "output");
    ZT_CHECK(input.scalar_type() == output.scalar_type(), UsageError, "reduce_scatter: input is ",
             input.scalar_type(), " but output is ", output.scalar_type(), "; they must match");
    ZT_CHECK(is_reducible(input.scalar_type()), NotSupported, "reduce_scatter: dtype ", input.scalar_type(),
             " cannot be reduced");
    const int64_t numel = input.numel();
    const ChunkRange mine = chunk_range(numel, ws(), backend().rank());
    ZT_CHECK(output.numel() == mine.numel, UsageError, "reduce_scatter: rank ", backend().rank(),
             "'s output has ", output.numel(), " elements, but its chunk of the ", numel,
             "-element input is ", mine.numel, " elements (comm::chunk_range)");
    const Fingerprint fp{Kind::kReduceScatter, static_cast<int64_t>(op), static_cast<int64_t>(input.scalar_type()),
                         numel};
    const int64_t seq = begin(fp, input.device());
    if (numel == 0) return Work();
    const int64_t chunk = chunk_numel_max(numel, ws());
    at::Tensor source = staged(flat(input));
    if (chunk * ws() != numel) {   // uneven chunks: pad to world_size equal chunks
      at::Tensor padded = at::zeros({chunk * ws()}, source.options());
      padded.narrow(0, 0, numel).copy_(source);
      source = padded;
    }
    const bool cast = !backend().reduces(input.scalar_type());
    if (cast) source = source.to(at::kFloat);
    // Reducing a bucket into its own chunk (output inside input) needs a separate result:
    // the backends read the whole input while writing the result.
    const bool direct = !cast && chunk == mine.numel && output.is_contiguous() && output.device() == source.device() &&
                        !detail::overlaps(output, source);
    at::Tensor result = direct ? output.view(-1) : at::empty({chunk}, source.options());
    const bool post_divide = op == ReduceOp::kAvg && !backend().averages(source.scalar_type());
    WorkPtr part = backend().reduce_scatter(source, result, post_divide ? ReduceOp::kSum : op);
    const int world = ws();
    return finish(seq, fp, part, [=] {
      (void)source;   // keep the (padded) input alive until the backend is done
      if (post_divide) detail::divide_in_place(result, world);
      copy_back(output, result.narrow(0, 0, mine.numel));
    });
  }

  Work all_gather(const at::Tensor& input, const at::Tensor& output) const {
    check_tensor(input, "all_gather", "input");
    check_tensor(output, "all_gather", "output");
    ZT_CHECK(input.scalar_type() == output.scalar_type(), UsageError, "all_gather: input is ",
             input.scalar_type(), " but output is ", output.scalar_type(), "; they must match");
    const int64_t numel = output.numel();
    const ChunkRange mine = chunk_range(numel, ws(), backend().rank());
    ZT_CHECK(input.numel() == mine.numel, UsageError, "all_gather: rank ", backend().rank(), "'s input has ",
             input.numel(), " elements, but its chunk of the ", numel, "-element output is ", mine.numel,
             " elements (comm::chunk_range)");
    const Fingerprint fp{Kind::kAllGather, -1, static_cast<int64_t>(input.scalar_type()), numel};
    const int64_t seq = begin(fp, input.device());
    if (numel == 0) return Work();
    const int64_t chunk = chunk_numel_max(numel, ws());
    at::Tensor source = staged(flat(input));
    if (source.numel() != chunk) {
      at::Tensor padded = at::zeros({chunk}, source.options());
      padded.narrow(0, 0, mine.numel).copy_(source);
      source = padded;
    }
    const bool even = chunk * ws() == numel;
    at::Tensor result = (even && output.is_contiguous() && output.device() == source.device())
                            ? output.view(-1)
                            : at::empty({chunk * ws()}, source.options());
    WorkPtr part = backend().all_gather(source, result);
    return finish(seq, fp, part, [=] {
      (void)source;
      copy_back(output, result.narrow(0, 0, numel));
    });
  }

  Work broadcast(const at::Tensor& tensor, int root) const {
    check_tensor(tensor, "broadcast", "");
    ZT_CHECK(root >= 0 && root < ws(), UsageError, "broadcast: root ", root, " is not a rank of this world of ",
             ws());
    const Fingerprint fp{Kind::kBroadcast, -1, static_cast<int64_t>(tensor.scalar_type()), tensor.numel(), root};
    const int64_t seq = begin(fp, tensor.device());
    if (tensor.numel() == 0) return Work();
    at::Tensor buffer = staged(flat(tensor));
    WorkPtr part = backend().broadcast(buffer, root);
    return finish(seq, fp, part, [=] { copy_back(tensor, buffer); });
  }

  Work barrier() const {
    const Fingerprint fp{Kind::kBarrier};
    const int64_t seq = begin(fp);
    return finish(seq, fp, backend().barrier(), nullptr);
  }
};

CommOptions options_from_config(const config::Config& config) {
  CommOptions options;
  switch (config.comm.backend.value_or(config::CommBackend::kGloo)) {
    case config::CommBackend::kGloo: options.backend = BackendKind::kGloo; break;
    case config::CommBackend::kMpi: options.backend = BackendKind::kMpi; break;
    case config::CommBackend::kNccl: options.backend = BackendKind::kNccl; break;
    case config::CommBackend::kShm: options.backend = BackendKind::kShm; break;
  }
  if (!config.comm.backend) options.backend = BackendKind::kAuto;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.comm.timeout_s * 1000));
  options.check_fingerprints = config.comm.check_fingerprints;
  return options;
}

Communicator Communicator::init(CommOptions options) { return init(rendezvous_from_env(), options); }

std::vector<Communicator> Communicator::make_thread_world(int world_size, CommOptions options) {
  ZT_CHECK(world_size >= 1, UsageError, "make_thread_world: world_size ", world_size, " must be at least 1");
  std::vector<Communicator> world;
  for (auto& backend : detail::make_thread_backends(world_size, options)) {
    auto state = std::make_shared<CommState>();
    state->backend = std::move(backend);
    state->options = options;
    world.push_back(Communicator(state));
  }
  return world;
}

Communicator Communicator::init(const RendezvousInfo& where, CommOptions options) {
  options = apply_env(options);
  auto state = std::make_shared<CommState>();
  state->options = options;
  const bool shm_required = options.backend == BackendKind::kShm;
  BackendKind kind = options.backend;
  if (kind == BackendKind::kAuto || shm_required) {
    kind = where.source == LaunchSource::kOpenMpi && detail::mpi_compiled() ? BackendKind::kMpi : BackendKind::kGloo;
  }
  const detail::Transport* chosen = detail::find_transport(kind);
  if (where.world_size == 1 && (chosen == nullptr || !chosen->on_device)) {
    state->backend = std::move(detail::make_thread_backends(1, options).front());
    ZT_LOG_DEBUG("comm: a world of one; collectives are local copies");
    return Communicator(state);
  }
  ZT_CHECK(!shm_required || options.shared_memory, ConfigError,
           "comm.backend \"shm\" asks for shared memory but ZEROTRAIN_SHM=0 turns it off; drop one of the two");
  ZT_CHECK(chosen != nullptr, ConfigError,
           "a torch.distributed process group is adopted (comm::adopt_process_group), not opened by name");
  state->backend = chosen->open(where, options);
  if (!chosen->on_device && (options.shared_memory || shm_required)) {
    state->backend = detail::make_shm_backend(std::move(state->backend), options, shm_required);
  }
  if (where.rank == 0) {
    ZT_LOG_INFO("comm: ", to_string(state->backend->kind()), " backend, world size ", where.world_size, " (from the ",
                to_string(where.source), " environment), timeout ", options.timeout.count() / 1000.0, " s",
                options.check_fingerprints ? ", fingerprint checks on" : "");
  }
  return Communicator(state);
}

Communicator Communicator::from_backend(std::unique_ptr<detail::Backend> backend, CommOptions options) {
  auto state = std::make_shared<CommState>();
  state->backend = std::move(backend);
  state->options = options;
  return Communicator(state);
}

int Communicator::rank() const { return state_->backend->rank(); }
int Communicator::world_size() const { return state_->backend->world_size(); }
BackendKind Communicator::backend() const { return state_->backend->kind(); }
const CommOptions& Communicator::options() const { return state_->options; }
int64_t Communicator::issued() const { return state_->seq; }

Work Communicator::all_reduce(const at::Tensor& tensor, ReduceOp op) { return Issuer{state_}.all_reduce(tensor, op); }
Work Communicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  return Issuer{state_}.reduce_scatter(input, output, op);
}
Work Communicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  return Issuer{state_}.all_gather(input, output);
}
Work Communicator::broadcast(const at::Tensor& tensor, int root) { return Issuer{state_}.broadcast(tensor, root); }
Work Communicator::barrier() { return Issuer{state_}.barrier(); }

Work Communicator::all_reduce_coalesced(const std::vector<at::Tensor>& tensors, ReduceOp op) {
  return detail::coalesced_all_reduce(coalescing_of(*this), tensors,
                                      [this, op](const at::Tensor& t) { return all_reduce(t, op); });
}
Work Communicator::reduce_scatter_coalesced(const std::vector<at::Tensor>& inputs,
                                            const std::vector<at::Tensor>& outputs, ReduceOp op) {
  return detail::coalesced_reduce_scatter(
      coalescing_of(*this), inputs, outputs,
      [this, op](const at::Tensor& in, const at::Tensor& out) { return reduce_scatter(in, out, op); });
}
Work Communicator::all_gather_coalesced(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  return detail::coalesced_all_gather(
      coalescing_of(*this), inputs, outputs,
      [this](const at::Tensor& in, const at::Tensor& out) { return all_gather(in, out); });
}

std::vector<std::string> Communicator::composed_paths() const {
  std::vector<std::string> paths;
  const auto& b = *state_->backend;
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong}) {
    if (!b.reduces(dtype)) paths.push_back(str("reductions of ", c10::toString(dtype), " run in float32"));
    else if (!b.averages(dtype)) paths.push_back(str("avg of ", c10::toString(dtype), " is a sum divided by the world size"));
  }
  paths.push_back("reduce_scatter/all_gather of a numel that the world size does not divide pad to equal chunks");
  return paths;
}

}  // namespace zerotrain::comm
