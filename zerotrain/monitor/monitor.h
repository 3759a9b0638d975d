// Where a training run's scalars go: TensorBoard event files, DeepSpeed's csv_monitor
// layout, JSON lines. The Trainer logs every logging_steps and after each evaluation, and
// both HF's --report_to and DeepSpeed's `tensorboard` / `csv_monitor` blocks write through
// these writers (docs/monitoring.md). No LibTorch.
//
// Only rank 0 writes: the caller creates writers on rank 0 and leaves the Monitor empty
// elsewhere. Errors throw IoError naming the file and the cause.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zerotrain::monitor {

// One value of a logging event. Tags are HF's: "train/loss", "train/learning_rate",
// "eval/loss", "eval/accuracy", ...
struct Scalar {
  std::string tag;
  double value = 0.0;
};

// One destination.
class Writer {
 public:
  virtual ~Writer() = default;
  // One logging event: every scalar at the same optimizer step.
  virtual void write(int64_t step, const std::vector<Scalar>& scalars) = 0;
  // Makes what was written durable (fdatasync). Every write already reaches the file (no
  // user-space buffering), so readers such as TensorBoard see it at once; call this at a
  // checkpoint and at the end of training, not every step.
  virtual void flush() = 0;
  // The file or folder written, for the "outputs went to" lines.
  virtual std::string where() const = 0;
};

// Fans one logging event out to several writers.
class Monitor {
 public:
  void add(std::unique_ptr<Writer> writer);
  void write(int64_t step, const std::vector<Scalar>& scalars);
  void flush();
  std::vector<std::string> destinations() const;
  bool empty() const { return writers_.empty(); }

 private:
  std::vector<std::unique_ptr<Writer>> writers_;
};

// A new event file "events.out.tfevents.<unix seconds>.<hostname>.<pid>" in `dir` (created
// with its parents). A resumed run writes a new file beside the old ones; TensorBoard merges
// the files of a folder.
std::unique_ptr<Writer> make_tensorboard_writer(const std::string& dir);
// One "<tag with '/' and ' ' as '_'>.csv" per tag in `dir` (created), DeepSpeed's
// csv_monitor layout. Rows are appended: a resumed run goes on in the same files.
std::unique_ptr<Writer> make_csv_writer(const std::string& dir);
// One JSON object per event, {"step": N, "<tag>": value, ...}, appended to `path` (its
// folder is created).
std::unique_ptr<Writer> make_jsonl_writer(const std::string& path);

}  // namespace zerotrain::monitor
