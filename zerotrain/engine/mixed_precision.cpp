// The precision half of a step: the overflow check all ranks agree on, and DeepSpeed's fp16
// loss scaling with our overflow watch on top.
#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain::engine::detail {
namespace {

// The sum of squares in float64, as DeepSpeed sums them, a piece at a time (a float64 copy
// of a whole gradient buffer would cost 8 bytes per element at the peak of the step). A
// 0-dim tensor on the gradients' device: the pieces add up there, in the order a host sum
// would add them, and nothing waits for the device until the step reads the result once.
at::Tensor sum_of_squares(const at::Tensor& t) {
  constexpr int64_t kPiece = 1 << 20;
  at::Tensor sum = at::zeros({}, t.options().dtype(at::kDouble));
  for (int64_t offset = 0; offset < t.numel(); offset += kPiece) {
    const at::Tensor piece = t.narrow(0, offset, std::min(kPiece, t.numel() - offset));
    sum = sum + at::linalg_vector_norm(piece, 2, {}, false, at::kDouble).square();
  }
  return sum;
}

}  // namespace

GradCheck EngineState::check_gradients() {
  const at::Device device = groups.empty() ? at::Device(at::kCPU) : stage->step_gradients(groups.front()).device();
  at::Tensor local = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  for (GroupState& g : groups) local = local + sum_of_squares(stage->step_gradients(g));
  GradCheck check;
  const bool sharded = traits().shards_optimizer;   // each rank holds its shard's gradients only
  if (!sharded && !scaler) {
    check.sum_squares = local.item<double>();
    return check;
  }
  // One collective for both: the shards' squares, and whether any rank saw inf or nan (an
  // overflow on one rank's shard must skip the step on all of them).
  at::Tensor both = at::stack({sharded ? local : at::zeros_like(local), at::isfinite(local).logical_not().to(at::kDouble)});
  comm.all_reduce(both, comm::ReduceOp::kSum).wait();
  // The check's one wait for the device: the reduced pair and this rank's own sum.
  const at::Tensor host = at::cat({both, local.reshape({1})}).to(at::kCPU);
  const double* v = host.data_ptr<double>();
  check.sum_squares = sharded ? v[0] : v[2];
  // DeepSpeed checks for overflow only in fp16: bf16 and fp32 steps are never skipped.
  check.overflow = scaler && v[1] > 0;
  return check;
}

std::vector<std::string> EngineState::overflowed_parameters() {
  size_t total = 0;
  for (const GroupState& g : groups) total += g.params.size();
  // The flags are set on the gradients' device and read back once, after the reduction.
  const at::Device device = groups.empty() ? at::Device(at::kCPU) : stage->step_gradients(groups.front()).device();
  auto flags = at::zeros({static_cast<int64_t>(std::max<size_t>(total, 1))}, at::TensorOptions().device(device));
  size_t base = 0;
  for (GroupState& g : groups) {
    const at::Tensor& grad = stage->step_gradients(g);
    for (const auto& piece : stage->gradient_pieces(g)) {
      if (piece.numel == 0) continue;
      at::Tensor flag = flags.select(0, static_cast<int64_t>(base + piece.param));
      const at::Tensor bad = at::isfinite(grad.narrow(0, piece.offset, piece.numel)).all().logical_not().to(at::kFloat);
      flag.copy_(at::maximum(flag, bad));
    }
    base += g.params.size();
  }
  comm.all_reduce(flags, comm::ReduceOp::kMax).wait();
  const at::Tensor host_flags = flags.to(at::kCPU);
  const float* flag = host_flags.data_ptr<float>();
  // Backward produces the last parameters first.
  std::vector<std::string> names;
  for (size_t gi = groups.size(); gi-- > 0;) {
    base -= groups[gi].params.size();
    for (size_t i = groups[gi].params.size(); i-- > 0;) {
      if (flag[base + i] > 0) names.push_back(groups[gi].param_names[i]);
    }
  }
  return names;
}

void EngineState::update_loss_scale(const GradCheck& check) {
  if (!scaler) return;
  const double attempted = scaler->scale();
  precision::StepRecord record{global_steps, check.overflow, attempted, attempted, std::nullopt, {}};
  if (check.overflow) record.overflowed_params = overflowed_parameters();
  if (!check.overflow && global_grad_norm && *global_grad_norm >= 0) record.grad_norm = global_grad_norm;   // this step's
  std::optional<std::string> line;
  try {
    line = scaler->update(check.overflow);
  } catch (const NumericsError& e) {
    // DeepSpeed's "already at minimum" error, with the diagnosis it lacks.
    record.next_scale = scaler->scale();
    watch->record(std::move(record), /*enforce_limits=*/false);
    throw NumericsError(watch->diagnosis("stopping: " + e.message()));
  }
  record.next_scale = scaler->scale();
  if (comm.rank() == 0 && line) {
    std::string_view rest = *line;   // DeepSpeed logs some events as two lines
    for (size_t cut; (cut = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(cut + 1)) {
      ZT_LOG_INFO(std::string(rest.substr(0, cut)));
    }
    ZT_LOG_INFO(std::string(rest));
  }
  watch->record(std::move(record), /*enforce_limits=*/false);
  if (comm.rank() == 0) {
    if (const auto note = watch->overflow_note()) ZT_LOG_INFO(*note);
  }
  watch->enforce_limits();
}

void EngineState::stop_if_not_finite(double grad_norm) {
  if (scaler) return;   // fp16: a skipped step and the overflow watch
  if (std::isfinite(grad_norm)) {
    last_finite_norm_step = global_steps;
    return;
  }
  const std::vector<std::string> names = overflowed_parameters();
  std::string listed;
  for (size_t i = 0; i < names.size() && i < 8; ++i) listed += (i ? ", " : "") + names[i];
  if (names.size() > 8) listed += ::zerotrain::detail::str(" and ", names.size() - 8, " more");
  std::string last = last_finite_norm_step
                         ? ::zerotrain::detail::str("the last finite gradient norm was ", global_grad_norm.value_or(-1), " at step ",
                                       *last_finite_norm_step + 1)
                         : std::string("no step had finite gradients");
  throw NumericsError(
      ::zerotrain::detail::str("step ", global_steps + 1, ": the gradients are not finite (norm ",
                               std::isnan(grad_norm) ? "nan" : "inf", ") in ",
                  precision::dtype_name(precision.model), " training: the loss became NaN or infinite. ",
                  "The weights were not updated. Non-finite gradients (last layer first): ",
                  listed.empty() ? "none listed" : listed, "; ", last,
                  ". Usual causes: a learning rate too high (now ", groups.empty() ? 0.0 : groups.front().hyper.lr,
                  "), no gradient clipping (gradient_clipping ", config.gradient_clipping.value,
                  "), or a batch holding inf or nan"),
      "numerics");
}

}  // namespace zerotrain::engine::detail
