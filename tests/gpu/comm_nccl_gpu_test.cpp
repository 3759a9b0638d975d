// The nccl backend on a GPU at world size 1 (ctest -L gpu): every collective and dtype, the
// fingerprint exchange on the GPU, what is refused, and a timeout. Every test skips where the
// machine shows no GPU, and fails where it shows one that LibTorch cannot use (gpu_required.h).
//
// World size 1 exercises the whole path through ProcessGroupNCCL (stores, streams, Work), but
// a reduction over one rank changes no value, so a collective that did nothing would leave an
// in-place all_reduce or broadcast right. What can still fail here is checked so that it
// does: every out-of-place result (reduce_scatter, all_gather and their coalesced forms) goes
// to a buffer filled beforehand with kSentinel, which no input holds; the coalesced forms
// carry tensors of other sizes and values in one bucket, so a misplaced copy shows; and
// inputs are written by kernels still queued when the collective is issued, so a collective
// that read them too early gets the old values. The values of reductions over several ranks
// on a GPU are checked by gpu_train_ws2 (comm_check with CUDA tensors, two ranks sharing a
// GPU over gloo); NCCL over several ranks needs several GPUs (it refuses two ranks on one).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

#include "tests/gpu/gpu_required.h"
#include "tests/unit/comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm {
namespace {

using namespace std::chrono_literals;
using test::contains;
using test::error_of;
using test::expect_same;
using test::input_for;
using test::reference;

constexpr at::ScalarType kDtypes[] = {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble, at::kLong};
constexpr int64_t kNumel = 1003;
// What an output buffer holds before a collective writes it: exact in every dtype, and never
// an input (those are in [-5, 5]), so an element the collective did not write shows.
constexpr double kSentinel = 99;

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ZT_REQUIRE_GPU();   // skips where the machine shows no GPU, fails where LibTorch cannot use it
  }

  // A world of one on cuda:0, from no launcher environment (no MASTER_ADDR).
  static Communicator make(bool fingerprints, std::chrono::milliseconds timeout = 60s) {
    CommOptions options = test::options_with(25 << 20, fingerprints, timeout);
    options.backend = BackendKind::kNccl;
    return Communicator::init(RendezvousInfo{}, options);
  }

  static at::Tensor on_gpu(const at::Tensor& t) { return t.to(at::Device(at::kCUDA, 0)); }
  static at::Tensor sentinel(int64_t numel, at::ScalarType dtype) { return on_gpu(at::full({numel}, kSentinel, dtype)); }

  // Checks that `t` is on this rank's GPU and holds `expected` (a CPU tensor).
  static void expect_gpu(const at::Tensor& t, const at::Tensor& expected, const std::string& what) {
    EXPECT_EQ(t.device(), at::Device(at::kCUDA, 0)) << what;
    expect_same(t.cpu(), expected, what);
  }
};

TEST_F(NcclGpu, EveryCollectiveInEveryDtype) {
  for (bool fingerprints : {false, true}) {
    Communicator c = make(fingerprints);
    ASSERT_EQ(c.backend(), BackendKind::kNccl);
    ASSERT_EQ(c.world_size(), 1);
    for (at::ScalarType dtype : kDtypes) {
      const std::string tag = std::string(c10::toString(dtype)) + (fingerprints ? ", fingerprints" : "");
      int salt = 0;
      for (ReduceOp op : test::kOps) {
        at::Tensor t = on_gpu(input_for(0, kNumel, dtype, ++salt));
        c.all_reduce(t, op).wait();
        expect_gpu(t, reference(1, kNumel, dtype, salt, op), tag + " all_reduce " + to_string(op));
      }
      {   // not contiguous: the Communicator reduces a copy and writes it back, into the
          // column and nowhere else
        at::Tensor full = on_gpu(input_for(0, 2 * kNumel, dtype, ++salt)).view({kNumel, 2});
        const at::Tensor expected = full.cpu().clone();
        c.all_reduce(full.select(1, 1), ReduceOp::kSum).wait();
        expect_gpu(full, expected, tag + " all_reduce of a column");
      }
      for (ReduceOp op : test::kOps) {
        at::Tensor in = on_gpu(input_for(0, kNumel, dtype, ++salt));
        at::Tensor out = sentinel(kNumel, dtype);
        c.reduce_scatter(in, out, op).wait();
        expect_gpu(out, reference(1, kNumel, dtype, salt, op), tag + " reduce_scatter " + to_string(op));
        expect_gpu(in, input_for(0, kNumel, dtype, salt), tag + " reduce_scatter's input, unchanged");
      }
      {
        at::Tensor in = on_gpu(input_for(0, kNumel, dtype, ++salt));
        at::Tensor out = sentinel(kNumel, dtype);
        c.all_gather(in, out).wait();
        expect_gpu(out, input_for(0, kNumel, dtype, salt), tag + " all_gather");
      }
      {   // several tensors of other sizes and values in one bucket, into sentinel outputs
        const std::vector<int64_t> numels{kNumel, 1, 17, 64};
        std::vector<int> salts;
        std::vector<at::Tensor> ins, outs, shards, gathered;
        for (int64_t n : numels) {
          salts.push_back(++salt);
          ins.push_back(on_gpu(input_for(0, n, dtype, salts.back())));
          outs.push_back(sentinel(n, dtype));
          shards.push_back(on_gpu(input_for(0, n, dtype, salts.back())));
          gathered.push_back(sentinel(n, dtype));
        }
        c.reduce_scatter_coalesced(ins, outs, ReduceOp::kSum).wait();
        c.all_gather_coalesced(shards, gathered).wait();
        for (size_t k = 0; k < numels.size(); ++k) {
          const std::string which = "[" + std::to_string(k) + "]";
          expect_gpu(outs[k], reference(1, numels[k], dtype, salts[k], ReduceOp::kSum),
                     tag + " reduce_scatter_coalesced " + which);
          expect_gpu(gathered[k], input_for(0, numels[k], dtype, salts[k]), tag + " all_gather_coalesced " + which);
        }
      }
      {
        at::Tensor t = on_gpu(input_for(0, kNumel, dtype, ++salt));
        c.broadcast(t, 0).wait();
        expect_gpu(t, input_for(0, kNumel, dtype, salt), tag + " broadcast");
      }
      {
        const int first = ++salt, second = ++salt;
        std::vector<at::Tensor> ts{on_gpu(input_for(0, kNumel, dtype, first)), on_gpu(input_for(0, 17, dtype, second))};
        c.all_reduce_coalesced(ts, ReduceOp::kSum).wait();
        expect_gpu(ts[0], reference(1, kNumel, dtype, first, ReduceOp::kSum), tag + " all_reduce_coalesced [0]");
        expect_gpu(ts[1], reference(1, 17, dtype, second, ReduceOp::kSum), tag + " all_reduce_coalesced [1]");
      }
      c.barrier().wait();
    }
  }
}

TEST_F(NcclGpu, CollectivesReadInputsWrittenByKernelsStillQueued) {
  // The inputs are written by copies queued behind about a quarter second of matrix products
  // on the current stream, and the collectives are issued at once: ProcessGroupNCCL must
  // order its stream after those kernels, or it reads the zeros that were there before. The
  // results are read by a kernel queued after wait(), which must order it after the collective.
  Communicator c = make(/*fingerprints=*/false);
  // Everything that comes from the host first: a copy from pageable host memory waits for the
  // stream, which would let the products finish before the collectives are issued.
  const at::Tensor want = input_for(0, kNumel, at::kFloat, 1);
  const at::Tensor want_gpu = on_gpu(want);
  at::Tensor scattered_in = on_gpu(at::zeros({kNumel}, at::kFloat));
  at::Tensor gathered_in = on_gpu(at::zeros({kNumel}, at::kFloat));
  at::Tensor scattered = sentinel(kNumel, at::kFloat), gathered = sentinel(kNumel, at::kFloat);
  at::Tensor x = on_gpu(at::ones({4096, 4096}, at::kFloat)), w = on_gpu(at::eye(4096, at::kFloat));
  for (int i = 0; i < 100; ++i) x = at::matmul(x, w);   // ones stay ones, in fp32 and in TF32
  scattered_in.copy_(want_gpu);   // device to device: queued, not waited for
  gathered_in.copy_(want_gpu);
  Work reduce = c.reduce_scatter(scattered_in, scattered, ReduceOp::kSum);
  Work gather = c.all_gather(gathered_in, gathered);
  reduce.wait();
  gather.wait();
  expect_gpu(scattered * 2, want * 2, "reduce_scatter of an input written by queued kernels, read after wait()");
  expect_gpu(gathered * 2, want * 2, "all_gather of an input written by queued kernels, read after wait()");
}

TEST_F(NcclGpu, BarrierWithFingerprintChecks) {
  // The barrier has no tensor: its fingerprint exchange must still run on the GPU (it used
  // to be built on the CPU, which NCCL refuses).
  Communicator c = make(/*fingerprints=*/true);
  c.barrier().wait();
  c.barrier().wait();
  at::Tensor t = on_gpu(at::ones({4}, at::kFloat));
  c.all_reduce(t).wait();
  c.barrier().wait();
  EXPECT_EQ(c.issued(), 4);
  expect_gpu(t, at::ones({4}, at::kFloat), "all_reduce between barriers");
}

TEST_F(NcclGpu, CpuTensorsTravelThroughTheGpuOtherGpusAreRefused) {
  Communicator c = make(/*fingerprints=*/true);
  // The Communicator stages a CPU tensor through the backend's GPU and copies the result back.
  at::Tensor cpu = at::full({5}, 3.0, at::kFloat);
  c.all_reduce(cpu, ReduceOp::kSum).wait();
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_TRUE(at::equal(cpu, at::full({5}, 3.0, at::kFloat)));
  at::Tensor gathered = at::full({3}, kSentinel, at::kLong);
  c.all_gather(at::arange(3, at::kLong), gathered).wait();
  EXPECT_TRUE(at::equal(gathered, at::arange(3, at::kLong)));
  if (torch::cuda::device_count() > 1) {
    at::Tensor other = at::ones({4}, at::TensorOptions(at::kFloat).device(at::Device(at::kCUDA, 1)));
    const std::string wrong = error_of<UsageError>([&] { c.all_reduce(other).wait(); }, "tensor on cuda:1");
    EXPECT_TRUE(contains(wrong, "drives cuda:0")) << wrong;
  }
}

TEST_F(NcclGpu, LocalRankBeyondTheVisibleGpusIsRefused) {
  const int visible = static_cast<int>(torch::cuda::device_count());
  RendezvousInfo where;
  where.local_rank = visible;   // one more rank on this node than there are GPUs
  CommOptions options = test::options_with();
  options.backend = BackendKind::kNccl;
  const std::string message = error_of<ConfigError>([&] { Communicator::init(where, options); }, "LOCAL_RANK");
  EXPECT_TRUE(contains(message, "LOCAL_RANK is " + std::to_string(visible))) << message;
  EXPECT_TRUE(contains(message, "sees " + std::to_string(visible) + " GPU")) << message;
  EXPECT_TRUE(contains(message, "CUDA_VISIBLE_DEVICES")) << message;
  EXPECT_TRUE(contains(message, "gloo")) << message;
}

TEST_F(NcclGpu, ACollectiveStuckBehindTheStreamTimesOutWithItsName) {
  // At world size 1 no peer can be late, but the collective can: ProcessGroupNCCL starts it
  // only after the work already queued on the current stream, here 300 matmuls of 8192 x 8192
  // (seconds in fp32 on an H100, still about a second with TF32), far beyond our timeout.
  Communicator c = make(/*fingerprints=*/false, 200ms);
  at::Tensor t = on_gpu(at::ones({1024}, at::kFloat));
  // ProcessGroupNCCL opens its NCCL communicator at the first collective, and opening it
  // waits for the whole GPU (its allocations synchronise the device): issued first behind
  // the matmuls, the collective would be held on the CPU until they finished, and then
  // finish at once. So the communicator is opened here, before there is anything to wait on.
  c.all_reduce(t).wait();
  at::Tensor x = on_gpu(at::ones({8192, 8192}, at::kFloat)), w = on_gpu(at::eye(8192, at::kFloat));
  for (int i = 0; i < 300; ++i) x = at::matmul(x, w);
  const std::string message = error_of<TimeoutError>([&] { c.all_reduce(t).wait(); }, "stuck all_reduce");
  EXPECT_TRUE(contains(message, "all_reduce(Float, 1024 elements, sum) (collective #2) on rank 0 did not finish "
                                "within 0.2 s"))
      << message;
  EXPECT_TRUE(contains(message, "ZEROTRAIN_COMM_TIMEOUT_S")) << message;
  // The communicator is broken from now on, and says so.
  const std::string after = error_of<CommError>([&] { c.barrier().wait(); }, "barrier after the timeout");
  EXPECT_TRUE(contains(after, "unusable after an earlier failure")) << after;
}

}  // namespace
}  // namespace zerotrain::comm
