// The training loop, HF's Trainer._inner_training_loop: epochs of DistributedSampler batches,
// accumulation, logging every logging_steps, evaluation and checkpoints by their strategies,
// and the callbacks' control.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "zerotrain/core/error.h"
#include "zerotrain/data/loader.h"
#include "zerotrain/data/sampler.h"
#include "zerotrain/trainer/device.h"
#include "zerotrain/trainer/preemption.h"
#include "zerotrain/trainer/trainer_impl.h"

namespace zerotrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// DeepSpeed's wall_clock_breakdown: forward, backward and step times of each micro-step,
// summed until they are printed.
struct StepTimers {
  double forward_ms = 0, backward_ms = 0, step_ms = 0;
  int64_t micro_steps = 0;
  void reset() { *this = {}; }
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The GPU caching allocator's bytes per rank (allocated and reserved, now and at their peak),
// beside the CPU's peak RSS; nothing on a CPU run. Every rank takes part in the gathers.
void add_device_memory(nlohmann::ordered_json& line, comm::Communicator& comm, c10::Device device) {
  const auto memory = trainer::device_memory(device);
  if (!memory) return;
  line["gpu_allocated_bytes"] = trainer::per_rank(comm, memory->allocated_bytes);
  line["gpu_reserved_bytes"] = trainer::per_rank(comm, memory->reserved_bytes);
  line["gpu_peak_allocated_bytes"] = trainer::per_rank(comm, memory->peak_allocated_bytes);
  line["gpu_peak_reserved_bytes"] = trainer::per_rank(comm, memory->peak_reserved_bytes);
}

}  // namespace

TrainOutput Trainer::Impl::train() {
  if (resume_from) resume(*resume_from);
  const int64_t first_step = engine->global_steps(), first_samples = engine->global_samples();
  const int64_t steps_per_epoch = state.steps_per_epoch;
  state.global_step = first_step;
  int64_t epoch = first_step / steps_per_epoch;
  int64_t skip_steps = first_step % steps_per_epoch;   // HF: steps_trained_in_current_epoch
  state.epoch = static_cast<double>(first_step) / static_cast<double>(steps_per_epoch);
  control = {};
  each_callback([&](TrainerCallback& c) { c.on_train_begin(args, state, control); });
  if (first_step >= state.max_steps && is_rank0()) {
    log->say("zerotrain train: nothing to train: the run is at global step " + std::to_string(first_step) + " and " +
             (args.max_steps > 0 ? "--max_steps is " : "the last step of the epochs is ") +
             std::to_string(state.max_steps));
  }

  const data::DistributedSampler sampler(data.train->size(), {.num_replicas = world_size(),
                                                               .rank = rank(),
                                                               .shuffle = true,
                                                               .seed = static_cast<uint64_t>(args.seed),
                                                               .drop_last = args.dataloader_drop_last});
  const Config& c = engine->config();
  const int64_t timer_every = c.steps_per_print.value_or(args.logging_steps);
  StepTimers timers;
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_samples = first_samples;
  double window_loss = 0, logged_loss_sum = 0, last_logged_loss = 0;
  int64_t window_steps = 0, logs = 0, last_saved_step = -1;
  double eval_s_in_epoch = 0;
  double eval_s_in_window = 0;   // evaluation and saving since the last log: not training time

  auto do_log = [&] {
    const double loss = trainer::mean_over_ranks(*comm, window_loss / static_cast<double>(std::max<int64_t>(window_steps, 1)));
    // One instant for the window's end, elapsed_s and the next window's start, so a window's
    // samples_per_s and the elapsed_s of two log lines tell the same time (the logging's own
    // collectives and writes are the next window's, not nobody's).
    const auto now = Clock::now();
    const double window_s = std::chrono::duration<double>(now - window_start).count() - eval_s_in_window;
    const int64_t samples = engine->global_samples();
    const auto state_bytes = trainer::per_rank(*comm, engine->model_state_bytes().total());
    const auto rss = trainer::per_rank(*comm, trainer::peak_rss_bytes());
    const auto baselines = trainer::per_rank(*comm, baseline_rss_bytes);
    const double lr = engine->get_lr().front();
    const double grad_norm = engine->get_global_grad_norm().value_or(0.0);
    const double samples_per_s = static_cast<double>(samples - window_samples) / std::max(window_s, 1e-9);
    Metrics logged{{"loss", loss}, {"grad_norm", grad_norm}, {"learning_rate", lr}, {"epoch", state.epoch}};
    if (engine->model_dtype() == torch::kHalf) {
      logged.emplace_back("loss_scale", engine->loss_scale());
      logged.emplace_back("skipped_steps", static_cast<double>(engine->skipped_steps()));
    }
    nlohmann::ordered_json line{{"step", state.global_step},
                                {"epoch", state.epoch},
                                {"loss", loss},
                                {"grad_norm", grad_norm},
                                {"learning_rate", lr},
                                {"lr", lr},
                                {"loss_scale", engine->loss_scale()},
                                {"skipped", engine->skipped_steps()},
                                {"samples_per_s", samples_per_s},
                                {"elapsed_s", std::chrono::duration<double>(now - start).count()},
                                {"process_s", trainer::process_age_s()},
                                {"model_state_bytes", state_bytes},
                                {"peak_rss_bytes", rss},
                                {"baseline_rss_bytes", baselines}};
    add_device_memory(line, *comm, device);
    log->train_log(state.global_step, line, logged);
    state.log_history.emplace_back(state.global_step, logged);
    each_callback([&](TrainerCallback& cb) { cb.on_log(args, state, control, logged); });
    logged_loss_sum += loss;
    last_logged_loss = loss;
    ++logs;
    window_loss = 0;
    window_steps = 0;
    window_start = now;
    eval_s_in_window = 0;
    window_samples = samples;
  };
  // Evaluation and saving since `t`: not training time, for the epoch's and the window's rates.
  auto off_training_since = [&](Clock::time_point t) {
    const double s = seconds_since(t);
    eval_s_in_epoch += s;
    eval_s_in_window += s;
  };
  auto do_evaluate = [&] {
    const auto t = Clock::now();
    evaluate();
    off_training_since(t);
  };
  std::string last_saved_dir;
  auto do_save = [&] {
    if (!saves || state.global_step == last_saved_step) return;
    const auto t = Clock::now();
    last_saved_dir = save();
    last_saved_step = state.global_step;
    off_training_since(t);
  };
  // After each step every rank learns whether any was signalled, so all stop after the same one.
  std::optional<trainer::SignalWatch> signals;
  if (args.save_on_signal.value_or(!args.output_dir.empty())) signals.emplace();
  auto stop_if_signalled = [&] {
    const int signo = trainer::agreed_signal(*comm, signals->received());
    if (signo == 0) return;
    if (state.global_step != last_saved_step) {
      last_saved_dir = save();
      last_saved_step = state.global_step;
    }
    finish_save();   // the process ends next: a save in the background is published first
    signals->save_finished();
    log->event({{"event", "stopped_on_signal"}, {"signal", trainer::signal_name(signo)}, {"step", state.global_step},
                {"checkpoint", last_saved_dir}});
    log->finish();
    throw Preempted(std::string("got ") + trainer::signal_name(signo) + ": saved checkpoint " + last_saved_dir +
                    " at global step " + std::to_string(state.global_step) +
                    "; continue with --resume_from_checkpoint true");
  };

  bool stop = first_step >= state.max_steps;
  for (; epoch < state.num_train_epochs && !stop; ++epoch) {
    each_callback([&](TrainerCallback& cb) { cb.on_epoch_begin(args, state, control); });
    const auto epoch_start = Clock::now();
    eval_s_in_epoch = 0;
    data::DataLoader loader(data.train, sampler.indices(epoch),
                            {.batch_size = micro_batch,
                             .drop_last = args.dataloader_drop_last,
                             .num_workers = static_cast<int>(args.dataloader_num_workers),
                             .first_batch = skip_steps * accumulation});
    for (int64_t step_in_epoch = skip_steps; step_in_epoch < steps_per_epoch; ++step_in_epoch) {
      // The micro-batches' losses add up where they are computed: one read-back per step,
      // not one per micro-batch (on a GPU each read waits for the queued work).
      at::Tensor loss_sum_t;
      for (int64_t k = 0; k < accumulation; ++k) {
        auto batch = loader.next();
        ZT_CHECK(batch.has_value(), InternalError, "the loader ran out of batches at step ", step_in_epoch,
                 " of an epoch of ", steps_per_epoch);
        const auto t0 = Clock::now();
        auto loss = model->loss(batch->inputs.to(device), batch->targets.to(device));
        const auto t1 = Clock::now();
        engine->backward(loss);
        const auto t2 = Clock::now();
        engine->step();
        const auto t3 = Clock::now();
        timers.forward_ms += ms_between(t0, t1);
        timers.backward_ms += ms_between(t1, t2);
        timers.step_ms += ms_between(t2, t3);
        ++timers.micro_steps;
        const at::Tensor detached = loss.detach().to(at::kDouble);
        loss_sum_t = loss_sum_t.defined() ? loss_sum_t + detached : detached;
      }
      const double loss_sum = loss_sum_t.item<double>();
      state.global_step = engine->global_steps();
      state.epoch = static_cast<double>(epoch) +
                    static_cast<double>(step_in_epoch + 1) / static_cast<double>(steps_per_epoch);
      window_loss += loss_sum / static_cast<double>(accumulation);
      ++window_steps;
      log->step(state.global_step, state.epoch, loss_sum / static_cast<double>(accumulation),
                static_cast<double>(engine->global_samples() - first_samples) / std::max(seconds_since(start), 1e-9));
      each_callback([&](TrainerCallback& cb) { cb.on_step_end(args, state, control); });

      const int64_t g = state.global_step;
      const bool last = g >= state.max_steps;
      // HF's DefaultFlowCallback, plus a log at the last step (the final loss).
      if (g % args.logging_steps == 0 || (args.logging_first_step && g == 1) || last) do_log();
      if (c.wall_clock_breakdown && (g % timer_every == 0 || last) && timers.micro_steps > 0) {
        const double n = static_cast<double>(timers.micro_steps);
        log->timers(g, timers.forward_ms / n, timers.backward_ms / n, timers.step_ms / n);
        timers.reset();
      }
      const int64_t eval_every = args.eval_steps.value_or(args.logging_steps);
      if (args.eval_strategy == IntervalStrategy::kSteps && g % eval_every == 0) control.should_evaluate = true;
      if (args.save_strategy == IntervalStrategy::kSteps && args.save_steps > 0 && g % args.save_steps == 0) {
        control.should_save = true;
      }
      if (last) {
        control.should_training_stop = true;
        if (args.save_strategy != IntervalStrategy::kNo) control.should_save = true;   // HF saves at the end
      }
      if (control.should_evaluate) do_evaluate();
      if (control.should_save) do_save();
      if (args.save_hf_steps > 0 && g % args.save_hf_steps == 0) {
        const auto t = Clock::now();
        save_hf(std::filesystem::path(args.output_dir) / ("hf-" + std::to_string(g)));
        off_training_since(t);
      }
      control.should_evaluate = control.should_save = false;
      if (signals) stop_if_signalled();
      if (control.should_training_stop) break;
    }
    skip_steps = 0;
    each_callback([&](TrainerCallback& cb) { cb.on_epoch_end(args, state, control); });
    const double epoch_train_s = seconds_since(epoch_start) - eval_s_in_epoch;
    if (args.eval_strategy == IntervalStrategy::kEpoch) do_evaluate();
    if (args.save_strategy == IntervalStrategy::kEpoch) do_save();
    log->event({{"event", "epoch_end"}, {"epoch", epoch + 1}, {"step", state.global_step}, {"epoch_train_s", epoch_train_s}});
    stop = control.should_training_stop;
  }
  finish_save();
  // run_clm's trainer.save_model(): the trained model as the folder it came from.
  if (!args.output_dir.empty() && model->hf_export()) save_hf(args.output_dir);
  each_callback([&](TrainerCallback& cb) { cb.on_train_end(args, state, control); });

  const double runtime_s = seconds_since(start);
  const int64_t trained_samples = engine->global_samples() - first_samples;
  TrainOutput out;
  out.global_step = state.global_step;
  out.training_loss = logs > 0 ? logged_loss_sum / static_cast<double>(logs) : 0.0;
  out.metrics = {{"train_runtime", runtime_s},
                 {"train_samples_per_second", static_cast<double>(trained_samples) / std::max(runtime_s, 1e-9)},
                 {"train_steps_per_second",
                  static_cast<double>(state.global_step - first_step) / std::max(runtime_s, 1e-9)},
                 {"train_loss", out.training_loss},
                 {"epoch", state.epoch}};
  const auto rss = trainer::per_rank(*comm, trainer::peak_rss_bytes());
  nlohmann::ordered_json end{{"event", "end"},
                             {"steps", state.global_step},
                             {"samples", engine->global_samples()},
                             {"final_loss", last_logged_loss},
                             {"elapsed_s", runtime_s},
                             {"samples_per_s", static_cast<double>(trained_samples) / std::max(runtime_s, 1e-9)},
                             {"peak_rss_bytes", rss}};
  add_device_memory(end, *comm, device);
  for (const auto& [key, value] : out.metrics) end[key] = value;
  if (resume_from) end["resumed_from"] = resume_from->string();
  log->event(end);
  if (is_rank0()) {
    std::ostringstream summary;
    summary << "zerotrain train: done: " << state.global_step << " steps, " << std::round(state.epoch * 100) / 100
            << " epochs in " << std::round(runtime_s * 10) / 10 << " s ("
            << std::round(static_cast<double>(trained_samples) / std::max(runtime_s, 1e-9)) << " samples/s), mean logged loss "
            << out.training_loss;
    log->say(summary.str());
  }
  log->finish();
  if (is_rank0()) {
    for (const auto& d : log->destinations()) std::cout << "  " << d << std::endl;
  }
  return out;
}

}  // namespace zerotrain
