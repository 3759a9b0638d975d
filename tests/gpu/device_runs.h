// The GPU tests' common ground: a fixture that skips where the machine shows no GPU and fails
// where LibTorch cannot use the one it shows (gpu_required.h), the parity model trained through
// the engine on a given device (world size 1), and the bounds within which a CUDA run must
// reproduce a CPU run.
//
// Why bounds and not bits: the CPU engine reproduces itself bit for bit, but a GPU computes
// the same formulas with other kernels: cuBLAS sums a matmul's products in another order than
// the CPU BLAS, CUDA's tanh/exp are other (few-ULP) approximations, and the step is ATen's
// fused CUDA AdamW where the CPU engine runs its own SIMD Adam (the same formula, the
// operations in another order). Each is a rounding difference of about 1e-7 relative per
// step in fp32, the same kind as the reduction-order differences the CPU parity tests
// already bound (kParityTolerance, 1e-5 after 20 steps).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/gpu/gpu_required.h"
#include "tests/support/parity_model.h"
#include "tests/support/stage3_models.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::test::gpu {

// Every GPU test derives from this: it skips, saying why, where the machine shows no GPU
// (CI), and fails where it shows one that LibTorch cannot use (gpu_required.h).
template <class Base = ::testing::Test>
class GpuTest : public Base {
 protected:
  void SetUp() override { ZT_REQUIRE_GPU(); }
};

inline const c10::Device kCuda{c10::kCUDA, 0};
inline const c10::Device kCpu{c10::kCPU};

// How close a CUDA run must come to its CPU twin (or an offloaded run to one without).
struct Tolerance {
  double loss_relative = 0;    // every micro-step's loss
  double param_absolute = 0;   // every final parameter, after 20 steps
  double grad_norm_relative = 0;   // every step's global gradient norm (before clipping)
};

// fp32: 10x the CPU parity bound for the parameters (kParityTolerance, which already covers
// a change of reduction order and of Adam implementation) and 1e-4 relative for the losses;
// a run that went wrong anywhere (a wrong shard, a missed bucket, a stale stream) is off by
// 1e-2 or more. bf16/fp16: the model computes in 8/11-bit mantissas, so one rounding
// difference in a forward moves a loss by up to about 2^-8 relative and Adam can turn
// rounding noise on a near-zero gradient into a whole lr step (0.01) on a few weights, as
// parity_tolerance explains: 1% for the losses (the bound the CLI test puts on bf16 and fp16
// against fp32) and parity_tolerance's 2^-5 / 2^-6 for the parameters.
// The gradient norms: as the losses, but 2% in bf16 (the CPU parity bound; a gradient scaled
// wrongly somewhere, by the world size, the accumulation or the loss scale, is off by 2x or more,
// which Adam's parameters barely show).
inline Tolerance tolerance_for(const std::string& dtype) {
  if (dtype == "bf16") return {1e-2, 1.0 / 32, 2e-2};
  if (dtype == "fp16") return {1e-2, 1.0 / 64, 1e-2};
  return {1e-4, 10 * kParityTolerance, 1e-4};
}

// What a run is: the stage and accumulation of the parity model's training, its dtype, and
// the offload and fp16 loss-scaling settings of its config.
struct RunSpec {
  int stage = 0;
  int accumulation = 1;
  std::string dtype = "fp32";                // fp32, bf16 or fp16
  std::string offload_optimizer = "none";    // none or cpu
  std::string offload_param = "none";        // none or cpu (stage 3)
  bool dynamic_loss_scale = false;           // fp16: dynamic scaling instead of a static 1024
  std::set<int> poisoned_steps;              // steps whose first micro-batch's loss is made inf
};

inline void PrintTo(const RunSpec& s, std::ostream* os) {
  *os << "stage " << s.stage << ", accumulation " << s.accumulation << ", " << s.dtype << ", optimizer offload "
      << s.offload_optimizer << ", parameter offload " << s.offload_param
      << (s.dynamic_loss_scale ? ", dynamic loss scale" : "");
}

inline std::string name_of(const RunSpec& s) {
  return "stage" + std::to_string(s.stage) + "_gas" + std::to_string(s.accumulation) + "_" + s.dtype +
         (s.offload_optimizer == "none" ? "" : "_optimizer_" + s.offload_optimizer) +
         (s.offload_param == "none" ? "" : "_params_" + s.offload_param);
}

// parity_config's settings (small buckets, so that a step has several; every stage-3
// parameter sharded), with sub-groups small enough that an offloaded step walks several.
inline Config gpu_config(const RunSpec& s) {
  std::string zero = R"({"stage": )" + std::to_string(s.stage) + R"(, "reduce_bucket_size": 50, "sub_group_size": 40)";
  if (s.stage == 3) zero += R"(, "stage3_param_persistence_threshold": 0)";
  if (s.offload_optimizer != "none") {
    zero += R"(, "offload_optimizer": {"device": ")" + s.offload_optimizer + R"(", "pin_memory": true})";
  }
  if (s.offload_param != "none") {
    zero += R"(, "offload_param": {"device": ")" + s.offload_param + R"(", "pin_memory": true})";
  }
  std::string json = R"({"train_batch_size": 16, "gradient_accumulation_steps": )" + std::to_string(s.accumulation) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.0}})" +
                     R"(, "zero_optimization": )" + zero + "}";
  if (s.dtype == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (s.dtype == "fp16" && s.dynamic_loss_scale) {
    // Starts far too high, so that the first steps overflow and the scale comes down; grows
    // back after 6 clean steps, so that it can overflow again.
    json += R"(, "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 20, "loss_scale_window": 6,
               "hysteresis": 2, "min_loss_scale": 1})";
  } else if (s.dtype == "fp16") {
    json += R"(, "fp16": {"enabled": true, "loss_scale": )" + std::to_string(kParityLossScale) + "}";
  }
  return Config::from_string(json + "}");
}

// World size 1 on `device`: the nccl backend for a GPU where this build has it (what the
// issue asks to test), else the in-process backend (a world of one: local copies).
inline comm::Communicator communicator_for(const c10::Device& device) {
#if ZEROTRAIN_TEST_NCCL
  if (device.is_cuda()) return comm::Communicator::init(comm::RendezvousInfo{}, {.backend = comm::BackendKind::kNccl});
#endif
  return comm::Communicator::make_thread_world(1).front();
}

struct DeviceRun {
  std::vector<float> losses;            // every micro-step's, before any poisoning
  std::vector<double> loss_scales;      // after every optimizer step
  std::vector<int64_t> skipped_steps;   // after every optimizer step
  std::vector<double> grad_norms;       // after every optimizer step; NaN where it was skipped
  std::vector<torch::Tensor> params;    // at the end: fp32, on the CPU
  std::string error;                    // what the run threw ("" if nothing)
};

// Trains the parity model (its stage-3 twin at stage 3) on the parity data for kSteps steps
// on `device`. The model is built and seeded on the CPU and then moved, so that both devices
// start from the same weights (the CPU generator's draws).
inline DeviceRun train_on(const c10::Device& device, const RunSpec& s) {
  DeviceRun run;
  try {
    const ParityData data = make_parity_data();
    const ParityCase pc{s.stage, 1, s.accumulation};
    std::shared_ptr<torch::nn::Module> module;
    std::function<torch::Tensor(const torch::Tensor&)> forward;
    if (s.stage == 3) {
      auto net = make_sharded_parity_net(false);
      net->to(device);
      module = net.ptr();
      forward = [net](const torch::Tensor& x) mutable { return net->forward(x); };
    } else {
      auto net = make_parity_net(false);
      net->to(device);
      module = net.ptr();
      forward = [net](const torch::Tensor& x) mutable { return net->forward(x); };
    }
    auto engine = zerotrain::initialize(module, gpu_config(s), {.comm = communicator_for(device)});
    for (int step = 0; step < kSteps; ++step) {
      for (int k = 0; k < s.accumulation; ++k) {
        auto x = rank_rows(data.x[step], pc, 0, k).to(device).to(engine.model_dtype());
        auto y = rank_rows(data.y[step], pc, 0, k).to(device);
        auto loss = torch::mse_loss(forward(x).to(torch::kFloat), y);
        // The forward ran where it was asked to: a run that quietly stayed on (or went back
        // to) the CPU would pass every comparison below.
        if (loss.device() != device) {
          throw std::runtime_error("the loss was computed on " + loss.device().str() + ", not on " + device.str());
        }
        const bool poison = k == 0 && s.poisoned_steps.count(step) > 0;
        engine.backward(poison ? loss * std::numeric_limits<float>::infinity() : loss);
        engine.step();
        run.losses.push_back(loss.item<float>());
      }
      run.loss_scales.push_back(engine.loss_scale());
      run.skipped_steps.push_back(engine.skipped_steps());
      run.grad_norms.push_back(engine.get_global_grad_norm().value_or(std::numeric_limits<double>::quiet_NaN()));
    }
    zerotrain::GatheredParameters full(engine, {});   // stage 3: the parameters whole
    for (auto& p : module->parameters()) run.params.push_back(p.detach().to(torch::kCPU, torch::kFloat).clone());
    full.close();
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  return run;
}

// `got` reproduces `want` within `tol`: every loss, every step's gradient norm (none on the
// same skipped steps) and every final parameter.
inline void expect_close_runs(const DeviceRun& got, const DeviceRun& want, const Tolerance& tol) {
  ASSERT_EQ(got.error, "");
  ASSERT_EQ(want.error, "");
  ASSERT_EQ(got.losses.size(), want.losses.size());
  double worst_loss = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.losses.size(); ++i) {
    double rel = std::abs(got.losses[i] - want.losses[i]) / std::max(std::abs(want.losses[i]), 1e-12f);
    if (std::isnan(rel)) rel = std::numeric_limits<double>::infinity();   // a NaN is the worst
    if (rel > worst_loss) worst_loss = rel, worst_at = i;
  }
  EXPECT_LE(worst_loss, tol.loss_relative)
      << "micro-step " << worst_at << ": loss " << got.losses[worst_at] << " vs " << want.losses[worst_at]
      << " (TF32 matmuls " << (at::globalContext().allowTF32CuBLAS() ? "on" : "off") << ")";
  ASSERT_EQ(got.grad_norms.size(), want.grad_norms.size());
  for (size_t s = 0; s < want.grad_norms.size(); ++s) {
    if (std::isnan(want.grad_norms[s])) {
      EXPECT_TRUE(std::isnan(got.grad_norms[s])) << "step " << s << " was skipped in one run only";
      continue;
    }
    EXPECT_NEAR(got.grad_norms[s], want.grad_norms[s], tol.grad_norm_relative * want.grad_norms[s])
        << "step " << s << ": global gradient norm";
  }
  // max_difference passes over NaNs (std::max), so non-finite parameters are looked for apart.
  for (size_t i = 0; i < got.params.size(); ++i) {
    EXPECT_TRUE(torch::isfinite(got.params[i]).all().item<bool>()) << "parameter " << i << " is not finite";
  }
  EXPECT_LE(max_difference(got.params, want.params), tol.param_absolute)
      << "the final parameters differ (TF32 matmuls " << (at::globalContext().allowTF32CuBLAS() ? "on" : "off") << ")";
}

}  // namespace zerotrain::test::gpu
