// The handle of an asynchronous collective. Every collective returns one at once; wait()
// blocks until it is done and rethrows whatever went wrong, with the collective's name and
// sequence number. A wait never blocks forever: without an argument it uses the
// communicator's timeout (CommOptions::timeout).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "zerotrain/core/error.h"

namespace zerotrain::comm {

namespace detail {
class WorkImpl;
}

class Work {
 public:
  Work() = default;   // an operation that is already complete (nothing to do)
  explicit Work(std::shared_ptr<detail::WorkImpl> impl) : impl_(std::move(impl)) {}

  // Throws TimeoutError when the operation has not finished within the timeout, and the
  // operation's own error (CommError, ...) when it failed. Waiting again rethrows the same.
  void wait();
  void wait(std::chrono::milliseconds timeout);
  bool is_completed() const;

 private:
  std::shared_ptr<detail::WorkImpl> impl_;
};

// Waits for each in order; the first error is rethrown after all others were waited for,
// so no operation is left running on buffers the caller is about to free.
void wait_all(std::initializer_list<Work*> works);
void wait_all(const std::vector<Work*>& works);
void wait_all(std::vector<Work>& works);

namespace detail {

using ::zerotrain::detail::str;

// What a backend returns: one pending operation.
class WorkImpl {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~WorkImpl() = default;
  // Blocks until done or `deadline`; returns false on timeout. Throws the operation's error.
  virtual bool wait_until(Clock::time_point deadline) = 0;
  virtual bool is_completed() = 0;
  // Used by Work::wait() without an argument.
  virtual std::chrono::milliseconds default_timeout() const { return std::chrono::hours(24); }
  // Throws TimeoutError for the plain wait(timeout) that ran out; the Communicator's
  // work overrides this to name the collective and the missing ranks.
  virtual void on_timeout(std::chrono::milliseconds timeout);
};

// A WorkImpl that is complete when created (world of one, empty inputs, the threads backend).
class DoneWork final : public WorkImpl {
 public:
  bool wait_until(Clock::time_point) override { return true; }
  bool is_completed() override { return true; }
};

}  // namespace detail
}  // namespace zerotrain::comm
