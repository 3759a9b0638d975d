// The Work the Communicator hands out: the backend's pending parts, a finishing step that
// copies results back into the caller's tensors, and what to say if it fails.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

struct CommState {
  std::unique_ptr<Backend> backend;
  CommOptions options;
  int64_t seq = 0;
  std::string broken;   // why the communicator can no longer be used; empty while healthy

  int rank() const { return backend->rank(); }
  // The missing-ranks sentence for a collective that did not complete.
  std::string diagnose(int64_t seq);
  void mark_broken(const std::string& why);
};

class CollectiveWork final : public WorkImpl {
 public:
  CollectiveWork(std::shared_ptr<CommState> state, int64_t seq, std::string what,
                 std::vector<WorkPtr> parts, std::function<void()> finish);

  bool wait_until(Clock::time_point deadline) override;
  bool is_completed() override;
  std::chrono::milliseconds default_timeout() const override { return state_->options.timeout; }
  void on_timeout(std::chrono::milliseconds timeout) override;

 private:
  [[noreturn]] void fail(const std::string& message, bool is_timeout);

  std::shared_ptr<CommState> state_;
  int64_t seq_;
  std::string what_;
  std::vector<WorkPtr> parts_;
  size_t next_part_ = 0;
  std::function<void()> finish_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A WorkImpl over several Works (the buckets of a coalesced call) with a finishing step.
class GroupWork final : public WorkImpl {
 public:
  GroupWork(std::vector<WorkPtr> parts, std::function<void()> finish, std::chrono::milliseconds timeout)
      : parts_(std::move(parts)), finish_(std::move(finish)), timeout_(timeout) {}
  bool wait_until(Clock::time_point deadline) override;
  bool is_completed() override;
  std::chrono::milliseconds default_timeout() const override { return timeout_; }
  void on_timeout(std::chrono::milliseconds timeout) override { parts_.at(next_part_)->on_timeout(timeout); }

 private:
  std::vector<WorkPtr> parts_;
  size_t next_part_ = 0;
  std::function<void()> finish_;
  std::chrono::milliseconds timeout_;
};

// A backend operation that failed while being issued: wait() rethrows its error.
class FailedWork final : public WorkImpl {
 public:
  explicit FailedWork(std::exception_ptr error) : error_(std::move(error)) {}
  bool wait_until(Clock::time_point) override { std::rethrow_exception(error_); }
  bool is_completed() override { return true; }

 private:
  std::exception_ptr error_;
};

// A backend operation that ran out of time while being issued (the threads backend).
class TimedOutWork final : public WorkImpl {
 public:
  bool wait_until(Clock::time_point) override { return false; }
  bool is_completed() override { return false; }
};

}  // namespace zerotrain::comm::detail
