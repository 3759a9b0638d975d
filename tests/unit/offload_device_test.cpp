// The pieces of offload from a GPU that a CPU can check: the host parameter swap keeps and
// returns chunks exactly, and the staging of a CPU stage copies nothing. The GPU side (pinned
// buffers, asynchronous copies) is in tests/gpu/.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "zerotrain/offload/device_staging.h"
#include "zerotrain/offload/param_swap_host.h"

namespace zerotrain::offload {
namespace {

TEST(HostParamSwap, ChunksComeBackAsWrittenInTheirDtype) {
  auto swap = make_host_param_swap(c10::Device(c10::kCPU));
  swap->add_group(0, {5, 3}, at::kBFloat16);
  swap->add_group(1, {4}, at::kFloat);
  const auto a = torch::randn({5}).to(at::kBFloat16), b = torch::randn({3}).to(at::kBFloat16);
  const auto c = torch::randn({2, 2});
  swap->write(0, 0, a);
  swap->write(0, 1, b);
  swap->write(1, 0, c);
  // Two reads in flight at once, finished out of order (the prefetch does that).
  const auto pending_b = swap->start_read(0, 1), pending_c = swap->start_read(1, 0);
  const auto pending_a = swap->start_read(0, 0);
  EXPECT_TRUE(torch::equal(swap->finish_read(pending_c), c.reshape({-1})));
  EXPECT_TRUE(torch::equal(swap->finish_read(pending_a), a));
  const auto got_b = swap->finish_read(pending_b);
  EXPECT_TRUE(torch::equal(got_b, b));
  EXPECT_EQ(got_b.scalar_type(), at::kBFloat16);
  EXPECT_EQ(swap->disk_nbytes(), 0);
  // A write after a read does not change what that read returned (chunks are their own).
  swap->write(0, 1, torch::zeros({3}, at::kBFloat16));
  EXPECT_TRUE(torch::equal(got_b, b));
  EXPECT_NE(swap->describe().find("host memory"), std::string::npos);
}

TEST(DeviceStaging, ACpuStageIsUsedInPlace) {
  DeviceStaging staging;
  const auto grads = torch::randn({10});
  staging.start_gradients(0, grads);
  staging.wait_gradients();
  EXPECT_EQ(staging.host_gradients(0).data_ptr(), grads.data_ptr());
  const auto weights = torch::zeros({10}, at::kBFloat16);
  EXPECT_EQ(staging.host_weights(0, 0, weights).data_ptr(), weights.data_ptr());
  staging.finish_weights(0, 0, weights);
  EXPECT_EQ(staging.host_nbytes(), 0);
}

}  // namespace
}  // namespace zerotrain::offload
