// The small state of training, in the manifest: the step counters, the learning-rate
// schedule's iteration, and fp16's loss scaler with its overflow watch. None is loaded with
// load_module_only.
#include "zerotrain/core/error.h"
#include "zerotrain/engine/checkpoint_providers/providers.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain::engine::detail {
namespace {

using checkpoint::Json;

int64_t field(const Json& j, const char* key, const std::string& file) {
  ZT_CHECK(j.is_object() && j.contains(key) && j[key].is_number_integer(), CheckpointError, file,
           ": loss_scaler.", key, " is missing or not an integer");
  return j[key].get<int64_t>();
}

class Counters final : public checkpoint::StateProvider {
 public:
  Counters(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void describe(checkpoint::Manifest& m) override {
    m.counters = {s_.global_steps, s_.global_samples, s_.skipped_steps, s_.micro_steps};
  }

  void commit_load(const checkpoint::Manifest& m) override {
    if (options_.load_module_only) return;
    s_.global_steps = m.counters.global_steps;
    s_.global_samples = m.counters.global_samples;
    s_.skipped_steps = m.counters.skipped_steps;
    // Saved at an accumulation boundary: the next micro-step starts an accumulation here too,
    // whatever gradient_accumulation_steps is now.
    s_.micro_steps = m.counters.global_steps * s_.accumulation_steps;
    s_.global_grad_norm.reset();
  }

 private:
  EngineState& s_;
  const CheckpointLoadOptions& options_;
};

class Schedule final : public checkpoint::StateProvider {
 public:
  Schedule(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void describe(checkpoint::Manifest& m) override {
    if (s_.schedule) m.lr_scheduler = {{"type", s_.config.scheduler->type}, {"last_batch_iteration", s_.schedule->iteration()}};
  }

  void plan_load(checkpoint::LoadPlan& plan) override {
    const Json& j = plan.manifest().lr_scheduler;
    if (options_.load_module_only || !s_.schedule || !options_.load_lr_scheduler_states || !j.is_object()) return;
    ZT_CHECK(j.contains("last_batch_iteration") && j["last_batch_iteration"].is_number_integer() &&
                 j["last_batch_iteration"].get<int64_t>() >= -1,
             CheckpointError, plan.manifest_file(), ": lr_scheduler.last_batch_iteration is missing or not an integer >= -1");
    iteration_ = j["last_batch_iteration"].get<int64_t>();
  }

  void commit_load(const checkpoint::Manifest&) override {
    if (!iteration_) return;
    s_.schedule->set_iteration(*iteration_);
    s_.apply_schedule();
  }

 private:
  EngineState& s_;
  const CheckpointLoadOptions& options_;
  std::optional<int64_t> iteration_;
};

class LossScaler final : public checkpoint::StateProvider {
 public:
  LossScaler(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void describe(checkpoint::Manifest& m) override {
    if (!s_.scaler) return;
    const auto st = s_.scaler->state();
    m.loss_scaler = {{"scale", st.scale}, {"iteration", st.iteration},
                     {"last_overflow_iteration", st.last_overflow_iteration}, {"hysteresis_left", st.hysteresis_left}};
    if (s_.watch) {
      const auto c = s_.watch->counts();
      m.loss_scaler["watch"] = {{"consecutive_skipped", c.consecutive_skipped}, {"steps_at_min_scale", c.steps_at_min_scale},
                                {"overflows_at_min_scale", c.overflows_at_min_scale}, {"total_skipped", c.total_skipped},
                                {"good_steps", c.good_steps}};
    }
  }

  void plan_load(checkpoint::LoadPlan& plan) override {
    const Json& j = plan.manifest().loss_scaler;
    if (options_.load_module_only || !s_.scaler || !j.is_object()) return;
    const std::string file = plan.manifest_file();
    ZT_CHECK(j.contains("scale") && j["scale"].is_number() && j["scale"].get<double>() > 0, CheckpointError, file,
             ": loss_scaler.scale is missing or not a positive number");
    scaler_ = precision::LossScalerState{j["scale"].get<double>(), field(j, "iteration", file),
                                         field(j, "last_overflow_iteration", file), field(j, "hysteresis_left", file)};
    if (s_.watch && j.contains("watch")) {
      const Json& w = j["watch"];
      watch_ = precision::OverflowWatch::Counts{field(w, "consecutive_skipped", file), field(w, "steps_at_min_scale", file),
                                                field(w, "overflows_at_min_scale", file), field(w, "total_skipped", file),
                                                field(w, "good_steps", file)};
    }
  }

  void commit_load(const checkpoint::Manifest&) override {
    if (scaler_) s_.scaler->restore(*scaler_);
    if (watch_) s_.watch->restore(*watch_);
  }

 private:
  EngineState& s_;
  const CheckpointLoadOptions& options_;
  std::optional<precision::LossScalerState> scaler_;
  std::optional<precision::OverflowWatch::Counts> watch_;
};

}  // namespace

std::unique_ptr<checkpoint::StateProvider> counters_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<Counters>(s, options);
}
std::unique_ptr<checkpoint::StateProvider> schedule_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<Schedule>(s, options);
}
std::unique_ptr<checkpoint::StateProvider> loss_scaler_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<LossScaler>(s, options);
}

}  // namespace zerotrain::engine::detail
