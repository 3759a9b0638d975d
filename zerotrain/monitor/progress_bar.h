// The training progress bar of rank 0 (the caller decides who draws). On a terminal one
// line is redrawn in place with '\r', at most every `redraw_interval_s`:
//
//    45%|█████████           | 450/1000 [00:42<00:52, 10.6 it/s] epoch 1.35 loss 0.4123 samples/s 2710
//
// Elsewhere (a log file, a pipe) nothing is drawn: the caller asks for a plain line with
// line() (every logging_steps), so log files hold no '\r' or escape sequences.
// The ETA uses the average step time since the first update: the first step (warm-up,
// allocations) is left out, and so are the steps done before a resume.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

namespace zerotrain::monitor {

struct ProgressBarOptions {
  int64_t total_steps = 0;        // optimizer steps of the whole run
  int64_t steps_per_epoch = 0;    // an update() without an epoch shows step / steps_per_epoch; 0: none
  // Whether `out` is a terminal; unset: isatty(fileno(stdout)).
  std::optional<bool> is_terminal;
  double redraw_interval_s = 0.1;
  int bar_width = 20;             // characters between the '|'
  // Seconds on a monotonic clock; tests give their own.
  std::function<double()> now_s;
};

// What one update shows. NaN loss or samples/s: not known yet, left out.
struct ProgressState {
  int64_t step = 0;
  int64_t total_steps = 0;
  double elapsed_s = 0.0;
  double eta_s = NAN;             // NaN: not known yet
  double steps_per_s = NAN;
  double epoch = NAN;
  double loss = NAN;
  double samples_per_s = NAN;
};

// "00:42", "1:02:03", "?" (NaN or negative).
std::string format_duration(double seconds);
// `fraction` (clamped to [0, 1]) of `width` cells in eighth blocks, padded with spaces.
std::string format_bar(double fraction, int width);
// The terminal line, without '\r'.
std::string format_bar_line(const ProgressState& state, int bar_width);
// The line of a log file: "step 450/1000 (45%) epoch 1.35 loss 0.4123 samples/s 2710
// elapsed 00:42 eta 00:52".
std::string format_plain_line(const ProgressState& state);

class ProgressBar {
 public:
  ProgressBar(ProgressBarOptions options, std::ostream& out);
  ~ProgressBar();   // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // After each optimizer step; redraws on a terminal (rate-limited, and always at the last
  // step), does nothing elsewhere. `epoch` NaN: step / steps_per_epoch when that is known.
  void update(int64_t step, double epoch, double loss = NAN, double samples_per_s = NAN);
  // The state of the last update() as a plain line: on a terminal above the bar, elsewhere
  // on its own.
  void line();
  // A line of text that does not garble the bar: the bar is cleared, the text printed and
  // the bar drawn again below it.
  void message(const std::string& text);
  // Ends the bar's line (a terminal) so that later output starts on a fresh line.
  void finish();

  bool is_terminal() const { return is_terminal_; }
  const ProgressState& state() const { return state_; }

 private:
  void draw();
  void clear();

  ProgressBarOptions options_;
  std::ostream& out_;
  bool is_terminal_ = false;
  double start_s_ = 0.0;
  std::optional<int64_t> first_step_;   // the first update: the ETA's origin
  double first_step_s_ = 0.0;
  double last_draw_s_ = -1e300;
  bool drawn_ = false;                  // a bar is on the current terminal line
  bool finished_ = false;
  ProgressState state_;
};

}  // namespace zerotrain::monitor
