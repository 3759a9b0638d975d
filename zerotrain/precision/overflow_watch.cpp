#include "zerotrain/precision/overflow_watch.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "zerotrain/core/error.h"

namespace zerotrain::precision {
namespace {

constexpr size_t kParamsShown = 8;

std::string scale_text(double scale) {
  std::ostringstream out;
  if (scale >= 1 && scale == static_cast<double>(static_cast<int64_t>(scale))) {
    out << static_cast<int64_t>(scale);
  } else {
    out << scale;
  }
  return out.str();
}

}  // namespace

OverflowWatch::OverflowWatch(const OverflowWatchOptions& options) : options_(options) {}

void OverflowWatch::record(StepRecord step, bool enforce) {
  if (step.overflow) {
    ++consecutive_skipped_;
    ++total_skipped_;
    for (const auto& name : step.overflowed_params) {
      auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& p) { return p.name == name; });
      if (it == params_.end()) {
        params_.push_back({name, step.step, 1});
      } else {
        ++it->steps;
      }
    }
  } else {
    consecutive_skipped_ = 0;
    ++good_steps_;
  }
  if (step.next_scale <= options_.min_scale) {
    ++steps_at_min_scale_;
    if (step.overflow && step.attempted_scale <= options_.min_scale) ++overflows_at_min_scale_;
  } else {
    steps_at_min_scale_ = 0;
    overflows_at_min_scale_ = 0;
  }
  recent_.push_back(std::move(step));
  while (recent_.size() > options_.history) recent_.pop_front();
  if (enforce) enforce_limits();
}

void OverflowWatch::enforce_limits() const {
  const int64_t skip_limit = options_.max_consecutive_skipped_steps;
  if (skip_limit > 0 && consecutive_skipped_ >= skip_limit) {
    throw NumericsError(diagnosis(detail::str(
        "stopping: ", consecutive_skipped_, " steps in a row were skipped because the gradients overflowed "
        "(fp16.max_consecutive_skipped_steps is ", skip_limit, ")")));
  }
  // Sitting at the floor is normal for a while after a fall: a dynamic scale doubles again a
  // window plus one step after the overflow that brought it there. Still
  // being there later means it overflowed again at the floor. A static scale never gets here
  // (overflow_watch_options turns the limit off).
  const int64_t floor_limit = options_.max_steps_at_min_scale;
  if (floor_limit > 0 && steps_at_min_scale_ >= floor_limit && overflows_at_min_scale_ > 0) {
    throw NumericsError(diagnosis(detail::str(
        "stopping: the loss scale has been at its minimum (fp16.min_loss_scale ", scale_text(options_.min_scale),
        ") for ", steps_at_min_scale_, " steps while gradients still overflow (fp16.max_steps_at_min_scale is ",
        floor_limit, ")")));
  }
}

std::optional<std::string> OverflowWatch::overflow_note() const {
  if (recent_.empty() || !recent_.back().overflow) return std::nullopt;
  const StepRecord& step = recent_.back();
  std::ostringstream out;
  out << "[zerotrain] step " << step.step + 1 << ": ";
  if (step.overflowed_params.empty()) {
    out << "inf/nan gradients";
  } else {
    constexpr size_t kNamed = 3;
    out << "inf/nan gradients in " << step.overflowed_params.size() << " parameter(s), first in backward: ";
    for (size_t i = 0; i < std::min(step.overflowed_params.size(), kNamed); ++i) {
      out << (i ? ", " : "") << step.overflowed_params[i];
    }
    if (step.overflowed_params.size() > kNamed) out << ", ...";
  }
  if (good_steps_ == 0) {
    out << "; usual while the loss scale comes down from 2^" << options_.initial_scale_power << " at the start";
  } else {
    out << "; " << total_skipped_ << " step(s) skipped in all, " << consecutive_skipped_ << " in a row";
  }
  return out.str();
}

std::string OverflowWatch::diagnosis(const std::string& headline) const {
  std::ostringstream out;
  out << headline << ".\n";
  out << "Diagnosis: " << total_skipped_ << " step(s) skipped in all, " << consecutive_skipped_ << " in a row.\n";
  if (!params_.empty()) {
    out << "Parameters whose gradients overflowed first (first overflowing step; steps with inf/nan):\n";
    for (size_t i = 0; i < std::min(params_.size(), kParamsShown); ++i) {
      out << "  " << params_[i].name << ": step " << params_[i].first_step << "; " << params_[i].steps << "\n";
    }
    if (params_.size() > kParamsShown) out << "  ... and " << params_.size() - kParamsShown << " more\n";
  }
  if (!recent_.empty()) {
    out << "Recent steps (loss scale used -> next; gradient norm):\n";
    for (const auto& s : recent_) {
      out << "  step " << s.step << ": " << scale_text(s.attempted_scale) << " -> " << scale_text(s.next_scale) << "; ";
      if (s.overflow) {
        out << "OVERFLOW, skipped\n";
      } else if (s.grad_norm) {
        out << std::setprecision(4) << *s.grad_norm << "\n";
      } else {
        out << "-\n";
      }
    }
  }
  out << "What to do:\n";
  if (good_steps_ == 0 && !recent_.empty() && recent_.back().next_scale > options_.min_scale) {
    out << "  - no step has succeeded yet and the scale is still coming down from 2^" << options_.initial_scale_power
        << ": start lower (fp16.initial_scale_power) or allow more skips (fp16.max_consecutive_skipped_steps);\n";
  }
  out << "  - train in bf16 instead (\"bf16\": {\"enabled\": true}, no \"fp16\" block): it has fp32's range and needs "
         "no loss scale;\n"
      << "  - if the norms above grew before the overflows, lower the learning rate or set gradient_clipping;\n"
      << "  - if one spike pulled the scale down, raise fp16.initial_scale_power (now " << options_.initial_scale_power
      << ") or fp16.hysteresis so the scale rides through it;\n"
      << "  - if the parameters listed first overflow at every scale, the overflow comes from the model itself "
         "(activations beyond fp16's 65504): keep that part in fp32 or use bf16.";
  return out.str();
}

}  // namespace zerotrain::precision
