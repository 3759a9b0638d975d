// Every collective of comm::Communicator across real processes, against reference values
// each rank computes locally. Run under `zerotrain launch` (or mpirun, or a torchrun-style
// environment); exits 0 when every check passed, 1 otherwise, naming each failure.
//
//   comm_check [--large] [--device DEVICE] [--adopt]
//     --large    adds tensors of 2^20 + 3 elements
//     --adopt    builds a c10d process group as torch.distributed.init_process_group("gloo")
//                does (a TCPStore on MASTER_PORT, a ProcessGroup holding a ProcessGroupGloo)
//                and runs the checks on the Communicator that adopts it
//                (comm/process_group/process_group.h)
//     --device   where the collectives' tensors live: cpu (default) or cuda:N (every rank on
//                GPU N: two ranks can share one GPU over gloo, as tests/gpu/train_ws2_gpu_test.sh
//                runs it). The references are computed on the CPU, and every result must be
//                on DEVICE.
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <signal.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/process_group/process_group.h"
#include "zerotrain/core/error.h"

namespace comm = zerotrain::comm;
using zerotrain::detail::str;

namespace {

// c10::Error's text carries a C++ backtrace after its first line.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int g_failures = 0;
int g_checks = 0;
at::Device g_device = at::kCPU;   // where the collectives' inputs and outputs live (--device)

// Small integers: exact in every dtype, and distinct per rank and index. On the CPU: the
// references are computed from these.
at::Tensor input_of(int rank, int64_t numel, at::ScalarType dtype) {
  auto i = at::arange(numel, at::kLong);
  return ((i * 7 + rank * 3) % 11 + rank).to(dtype);
}

// A collective's operands: input_of on the device, and output buffers there.
at::Tensor device_input(int rank, int64_t numel, at::ScalarType dtype) { return input_of(rank, numel, dtype).to(g_device); }
at::Tensor device_empty(int64_t numel, at::ScalarType dtype) {
  return at::empty({numel}, at::TensorOptions(dtype).device(g_device));
}

void expect(const std::string& what, const at::Tensor& got_on_device, const at::Tensor& want) {
  ++g_checks;
  if (got_on_device.device() != g_device) {
    ++g_failures;
    std::cerr << "FAIL " << what << ": the result is on " << got_on_device.device() << ", not on " << g_device
              << std::endl;
    return;
  }
  const at::Tensor got = got_on_device.cpu();
  bool ok = got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type();
  if (ok) {
    if (at::isFloatingType(want.scalar_type())) {
      const bool half = want.scalar_type() == at::kHalf || want.scalar_type() == at::kBFloat16;
      ok = at::allclose(got.to(at::kDouble), want.to(at::kDouble), half ? 1e-2 : 1e-6, half ? 1e-2 : 1e-6);
    } else {
      ok = at::equal(got, want);
    }
  }
  if (!ok) {
    ++g_failures;
    std::cerr << "FAIL " << what << ": got " << got.flatten().slice(0, 0, 8) << " want " << want.flatten().slice(0, 0, 8)
              << std::endl;
  }
}

at::Tensor reference(int ws, int64_t numel, at::ScalarType dtype, comm::ReduceOp op) {
  auto acc = input_of(0, numel, dtype).to(at::kDouble);
  for (int r = 1; r < ws; ++r) {
    auto x = input_of(r, numel, dtype).to(at::kDouble);
    acc = op == comm::ReduceOp::kMax ? at::maximum(acc, x) : acc + x;
  }
  if (op == comm::ReduceOp::kAvg) {
    acc = at::isFloatingType(dtype) ? acc / ws : at::div(acc.to(at::kLong), ws, "trunc").to(at::kDouble);
  }
  return acc.to(dtype);
}

void check_all(comm::Communicator& c, int64_t numel, at::ScalarType dtype) {
  const int ws = c.world_size(), rank = c.rank();
  const std::string tag = str(c10::toString(dtype), "[", numel, "]");
  const auto mine = comm::chunk_range(numel, ws, rank);
  for (auto op : {comm::ReduceOp::kSum, comm::ReduceOp::kAvg, comm::ReduceOp::kMax}) {
    auto t = device_input(rank, numel, dtype);
    c.all_reduce(t, op).wait();
    expect(str("all_reduce ", comm::to_string(op), " ", tag), t, reference(ws, numel, dtype, op));

    auto out = device_empty(mine.numel, dtype);
    c.reduce_scatter(device_input(rank, numel, dtype), out, op).wait();
    expect(str("reduce_scatter ", comm::to_string(op), " ", tag), out,
           reference(ws, numel, dtype, op).narrow(0, mine.offset, mine.numel));
  }
  {
    auto full = device_empty(numel, dtype);
    c.all_gather(device_input(rank, numel, dtype).narrow(0, mine.offset, mine.numel), full).wait();
    auto want = at::empty({numel}, dtype);
    for (int r = 0; r < ws; ++r) {
      auto ch = comm::chunk_range(numel, ws, r);
      want.narrow(0, ch.offset, ch.numel).copy_(input_of(r, numel, dtype).narrow(0, ch.offset, ch.numel));
    }
    expect("all_gather " + tag, full, want);
  }
  {
    // ZeRO's in-place forms: gather into the flat buffer that holds this rank's chunk, and
    // reduce a bucket into its own chunk.
    auto flat = at::zeros({numel}, at::TensorOptions(dtype).device(g_device));
    flat.narrow(0, mine.offset, mine.numel).copy_(input_of(rank, numel, dtype).narrow(0, mine.offset, mine.numel));
    c.all_gather(flat.narrow(0, mine.offset, mine.numel), flat).wait();
    auto want = at::empty({numel}, dtype);
    for (int r = 0; r < ws; ++r) {
      auto ch = comm::chunk_range(numel, ws, r);
      want.narrow(0, ch.offset, ch.numel).copy_(input_of(r, numel, dtype).narrow(0, ch.offset, ch.numel));
    }
    expect("all_gather in place " + tag, flat, want);
    auto bucket = device_input(rank, numel, dtype);
    auto own = bucket.narrow(0, mine.offset, mine.numel);
    c.reduce_scatter(bucket, own).wait();
    expect("reduce_scatter into own chunk " + tag, own,
           reference(ws, numel, dtype, comm::ReduceOp::kSum).narrow(0, mine.offset, mine.numel));
  }
  for (int root : {0, ws - 1}) {
    auto t = device_input(rank, numel, dtype);
    c.broadcast(t, root).wait();
    expect(str("broadcast root ", root, " ", tag), t, input_of(root, numel, dtype));
  }
}

void check_coalesced(comm::Communicator& c, at::ScalarType dtype) {
  const int ws = c.world_size(), rank = c.rank();
  const std::vector<int64_t> sizes{5, 1, 33, 2 * ws + 1};
  std::vector<at::Tensor> tensors, outs, shards, fulls;
  for (int64_t n : sizes) {
    tensors.push_back(device_input(rank, n, dtype));
    const auto ch = comm::chunk_range(n, ws, rank);
    outs.push_back(device_empty(ch.numel, dtype));
    shards.push_back(device_input(rank, n, dtype).narrow(0, ch.offset, ch.numel).clone());
    fulls.push_back(device_empty(n, dtype));
  }
  c.all_reduce_coalesced(tensors).wait();
  std::vector<at::Tensor> inputs;
  for (int64_t n : sizes) inputs.push_back(device_input(rank, n, dtype));
  c.reduce_scatter_coalesced(inputs, outs).wait();
  c.all_gather_coalesced(shards, fulls).wait();
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int64_t n = sizes[k];
    const auto ch = comm::chunk_range(n, ws, rank);
    const std::string tag = str(c10::toString(dtype), "[", n, "]");
    expect("all_reduce_coalesced " + tag, tensors[k], reference(ws, n, dtype, comm::ReduceOp::kSum));
    expect("reduce_scatter_coalesced " + tag, outs[k],
           reference(ws, n, dtype, comm::ReduceOp::kSum).narrow(0, ch.offset, ch.numel));
    auto want = at::empty({n}, dtype);
    for (int r = 0; r < ws; ++r) {
      auto cr = comm::chunk_range(n, ws, r);
      want.narrow(0, cr.offset, cr.numel).copy_(input_of(r, n, dtype).narrow(0, cr.offset, cr.numel));
    }
    expect("all_gather_coalesced " + tag, fulls[k], want);
  }
}

// What torch.distributed.init_process_group("gloo") builds, adopted.
comm::Communicator adopt_gloo_group(const comm::CommOptions& options) {
  const auto where = comm::rendezvous_from_env();
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(where.master_port);
  store_options.isServer = where.rank == 0;
  store_options.numWorkers = where.world_size;
  store_options.timeout = options.timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(where.master_addr, store_options);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(where.master_addr));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, where.rank, where.world_size, gloo_options);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, where.rank, where.world_size);
  group->setBackend(c10::kCPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  return comm::adopt_process_group({group, store}, at::kCPU, options);
}

}  // namespace

int main(int argc, char** argv) {
  bool large = false;
  bool adopt = false;
  try {
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--large") == 0) {
        large = true;
      } else if (std::strcmp(argv[i], "--adopt") == 0) {
        adopt = true;
      } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
        g_device = at::Device(argv[++i]);
      } else {
        std::cerr << "comm_check: unknown argument " << argv[i] << "; usage: comm_check [--large] [--device cpu|cuda:N] [--adopt]"
                  << std::endl;
        return 2;
      }
    }
  } catch (const std::exception& e) {   // c10::Error for a device string it cannot read
    std::cerr << "comm_check: --device: " << first_line(e.what()) << std::endl;
    return 2;
  }
  if (g_device.is_cuda() && !at::hasCUDA()) {
    std::cerr << "comm_check: --device " << g_device << ": LibTorch sees no CUDA device here (`zerotrain report` "
              << "says why)" << std::endl;
    return 1;
  }
  try {
    comm::CommOptions options;
    options.bucket_nbytes = 64;   // several buckets per coalesced call
    auto c = adopt ? adopt_gloo_group(options) : comm::Communicator::init(options);
    const int ws = c.world_size();
    if (c.backend() == comm::BackendKind::kGloo) {
      // A peer that dies must surface as a CommError from Gloo's write (EPIPE), not kill this
      // rank with SIGPIPE before it can say which peer is gone.
      ++g_checks;
      struct sigaction sigpipe{};
      ::sigaction(SIGPIPE, nullptr, &sigpipe);
      if (sigpipe.sa_handler != SIG_IGN) {
        ++g_failures;
        std::cerr << "FAIL SIGPIPE is not ignored under the gloo backend" << std::endl;
      }
    }
    for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong}) {
      for (int64_t numel : {int64_t{1}, int64_t{ws}, int64_t{4 * ws + 1}, int64_t{1000}}) check_all(c, numel, dtype);
      check_coalesced(c, dtype);
    }
    if (large) {
      for (auto dtype : {at::kFloat, at::kBFloat16}) check_all(c, (int64_t{1} << 20) + 3, dtype);
    }
    c.barrier().wait();
    // Every rank's verdict, so that rank 0 can say whether the whole world passed.
    auto failures = at::full({1}, static_cast<int64_t>(g_failures), at::kLong);
    c.all_reduce(failures).wait();
    if (c.rank() == 0) {
      // The CPU's line as it always was: tests match it.
      const std::string where = g_device.is_cpu() ? "" : " on " + g_device.str();
      std::cout << "comm_check: " << comm::to_string(c.backend()) << " world " << ws << where << ": " << g_checks
                << " checks per rank, " << failures.item<int64_t>() << " failed" << std::endl;
    }
    return failures.item<int64_t>() == 0 ? 0 : 1;
  } catch (const zerotrain::Error& e) {
    std::cerr << "comm_check: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const std::exception& e) {   // LibTorch's, on a device: say it rather than abort
    std::cerr << "comm_check: " << first_line(e.what()) << std::endl;
    return 1;
  }
}
