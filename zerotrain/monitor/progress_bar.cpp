#include "zerotrain/monitor/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

namespace zerotrain::monitor {
namespace {

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Eighth blocks, U+258F (one eighth) to U+2588 (full), as UTF-8.
constexpr const char* kEighths[9] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};

std::string format_rate(double steps_per_s) {
  if (!std::isfinite(steps_per_s) || steps_per_s <= 0) return "? it/s";
  // Slow steps read better as seconds per step, as tqdm prints them.
  if (steps_per_s < 1) return fmt::format("{:.2f} s/it", 1 / steps_per_s);
  return steps_per_s < 10 ? fmt::format("{:.2f} it/s", steps_per_s) : fmt::format("{:.1f} it/s", steps_per_s);
}

int percent(const ProgressState& s) {
  if (s.total_steps <= 0) return 0;
  return static_cast<int>(std::clamp<int64_t>(s.step * 100 / s.total_steps, 0, 100));
}

// " epoch 1.35 loss 0.4123 samples/s 2710": what is known of it.
std::string format_metrics(const ProgressState& s) {
  std::string out;
  if (std::isfinite(s.epoch)) out += fmt::format(" epoch {:.2f}", s.epoch);
  if (std::isfinite(s.loss)) out += fmt::format(" loss {:.4f}", s.loss);
  if (std::isfinite(s.samples_per_s)) out += fmt::format(" samples/s {:.0f}", s.samples_per_s);
  return out;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto total = static_cast<int64_t>(seconds);
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{:02}:{:02}", m, s);
}

std::string format_bar(double fraction, int width) {
  if (!(fraction >= 0)) fraction = 0;
  fraction = std::min(fraction, 1.0);
  const auto eighths = static_cast<int64_t>(fraction * width * 8);
  const int64_t full = eighths / 8, partial = eighths % 8;
  std::string out;
  for (int64_t i = 0; i < full; ++i) out += kEighths[8];
  int64_t cells = full;
  if (partial > 0) {
    out += kEighths[partial];
    ++cells;
  }
  out.append(static_cast<size_t>(std::max<int64_t>(width - cells, 0)), ' ');
  return out;
}

std::string format_bar_line(const ProgressState& s, int bar_width) {
  std::string out;
  if (s.total_steps > 0) {
    out = fmt::format("{:3d}%|{}| {}/{} ", percent(s),
                      format_bar(static_cast<double>(s.step) / static_cast<double>(s.total_steps), bar_width), s.step,
                      s.total_steps);
  } else {
    out = fmt::format("{} ", s.step);
  }
  out += fmt::format("[{}<{}, {}]", format_duration(s.elapsed_s), format_duration(s.eta_s), format_rate(s.steps_per_s));
  return out + format_metrics(s);
}

std::string format_plain_line(const ProgressState& s) {
  std::string out = s.total_steps > 0 ? fmt::format("step {}/{} ({}%)", s.step, s.total_steps, percent(s))
                                      : fmt::format("step {}", s.step);
  return out + format_metrics(s) +
         fmt::format(" elapsed {} eta {}", format_duration(s.elapsed_s), format_duration(s.eta_s));
}

ProgressBar::ProgressBar(ProgressBarOptions options, std::ostream& out) : options_(std::move(options)), out_(out) {
  if (!options_.now_s) options_.now_s = steady_now_s;
  is_terminal_ = options_.is_terminal.value_or(::isatty(::fileno(stdout)) == 1);
  start_s_ = options_.now_s();
  state_.total_steps = options_.total_steps;
}

ProgressBar::~ProgressBar() {
  try {
    finish();
  } catch (...) {   // a stream set to throw; nothing to do about it in a destructor
  }
}

void ProgressBar::update(int64_t step, double epoch, double loss, double samples_per_s) {
  const double now = options_.now_s();
  if (!first_step_) {
    first_step_ = step;
    first_step_s_ = now;
  }
  state_.step = step;
  state_.epoch = std::isnan(epoch) && options_.steps_per_epoch > 0
                     ? static_cast<double>(step) / static_cast<double>(options_.steps_per_epoch)
                     : epoch;
  state_.loss = loss;
  state_.samples_per_s = samples_per_s;
  state_.elapsed_s = now - start_s_;
  const auto steps_timed = static_cast<double>(step - *first_step_);
  if (steps_timed > 0 && now > first_step_s_) {
    state_.steps_per_s = steps_timed / (now - first_step_s_);
    if (options_.total_steps > 0) {
      state_.eta_s = static_cast<double>(std::max<int64_t>(options_.total_steps - step, 0)) / state_.steps_per_s;
    }
  }
  if (!is_terminal_ || finished_) return;
  const bool last = options_.total_steps > 0 && step >= options_.total_steps;
  if (last || now - last_draw_s_ >= options_.redraw_interval_s) {
    last_draw_s_ = now;
    draw();
  }
}

void ProgressBar::line() { message(format_plain_line(state_)); }

void ProgressBar::message(const std::string& text) {
  const bool redraw = drawn_;
  clear();
  out_ << text << '\n';
  if (redraw) draw();
  out_.flush();
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (is_terminal_ && first_step_) {
    draw();   // the last update may have been skipped by the rate limit
    out_ << '\n';
    drawn_ = false;
  }
  out_.flush();
}

void ProgressBar::draw() {
  // "\x1b[K" erases what a longer previous line left to the right.
  out_ << '\r' << format_bar_line(state_, options_.bar_width) << "\x1b[K";
  out_.flush();
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  out_ << "\r\x1b[K";
  drawn_ = false;
}

}  // namespace zerotrain::monitor
