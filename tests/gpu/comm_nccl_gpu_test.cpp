// The nccl backend on a GPU at world size 1 (ctest -L gpu): every collective and dtype, the
// fingerprint exchange on the GPU, what is refused, and a timeout. Every test skips where no
// GPU is visible. World size 1 exercises the whole path through ProcessGroupNCCL (stores,
// streams, Work) though a reduction over one rank changes no value; several ranks need
// several GPUs (NCCL refuses two ranks on one), and the multi-process tests cover the
// Communicator's logic across ranks on gloo and mpi.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

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

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible";
  }

  // A world of one on cuda:0, from no launcher environment (no MASTER_ADDR).
  static Communicator make(bool fingerprints, std::chrono::milliseconds timeout = 60s) {
    CommOptions options = test::options_with(25 << 20, fingerprints, timeout);
    options.backend = BackendKind::kNccl;
    return Communicator::init(RendezvousInfo{}, options);
  }

  static at::Tensor on_gpu(const at::Tensor& t) { return t.to(at::Device(at::kCUDA, 0)); }

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
      {   // not contiguous: the Communicator reduces a copy and writes it back
        at::Tensor full = on_gpu(input_for(0, 2 * kNumel, dtype, ++salt)).view({kNumel, 2});
        at::Tensor column = full.select(1, 1);
        const at::Tensor expected = column.cpu().clone();
        c.all_reduce(column, ReduceOp::kSum).wait();
        expect_gpu(column.contiguous(), expected, tag + " all_reduce of a column");
      }
      {
        at::Tensor in = on_gpu(input_for(0, kNumel, dtype, ++salt));
        at::Tensor out = on_gpu(at::zeros({kNumel}, dtype));
        c.reduce_scatter(in, out, ReduceOp::kSum).wait();
        expect_gpu(out, reference(1, kNumel, dtype, salt, ReduceOp::kSum), tag + " reduce_scatter");
      }
      {
        at::Tensor in = on_gpu(input_for(0, kNumel, dtype, ++salt));
        at::Tensor out = on_gpu(at::zeros({kNumel}, dtype));
        c.all_gather(in, out).wait();
        expect_gpu(out, input_for(0, kNumel, dtype, salt), tag + " all_gather");
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
  at::Tensor gathered = at::empty({3}, at::kLong);
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
  at::Tensor x = on_gpu(at::ones({8192, 8192}, at::kFloat)), w = on_gpu(at::eye(8192, at::kFloat));
  for (int i = 0; i < 300; ++i) x = at::matmul(x, w);
  const std::string message = error_of<TimeoutError>([&] { c.all_reduce(t).wait(); }, "stuck all_reduce");
  EXPECT_TRUE(contains(message, "all_reduce(Float, 1024 elements, sum) (collective #1) on rank 0 did not finish "
                                "within 0.2 s"))
      << message;
  EXPECT_TRUE(contains(message, "ZEROTRAIN_COMM_TIMEOUT_S")) << message;
  // The communicator is broken from now on, and says so.
  const std::string after = error_of<CommError>([&] { c.barrier().wait(); }, "barrier after the timeout");
  EXPECT_TRUE(contains(after, "unusable after an earlier failure")) << after;
}

}  // namespace
}  // namespace zerotrain::comm
