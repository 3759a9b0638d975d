#include "zerotrain/comm/collective_work.h"

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {

std::string CommState::diagnose(int64_t seq) {
  try {
    return describe_missing(backend->progress().snapshot(), seq, rank());
  } catch (const std::exception& e) {
    return str("the other ranks' progress could not be read (", e.what(), ")");
  }
}

void CommState::mark_broken(const std::string& why) {
  if (broken.empty()) {
    broken = why;
    backend->abandon();
  }
}

CollectiveWork::CollectiveWork(std::shared_ptr<CommState> state, int64_t seq, std::string what,
                               std::vector<WorkPtr> parts, std::function<void()> finish)
    : state_(std::move(state)), seq_(seq), what_(std::move(what)), parts_(std::move(parts)),
      finish_(std::move(finish)) {}

bool CollectiveWork::wait_until(Clock::time_point deadline) {
  if (error_) std::rethrow_exception(error_);
  if (done_) return true;
  try {
    for (; next_part_ < parts_.size(); ++next_part_) {
      if (!parts_[next_part_]->wait_until(deadline)) return false;
    }
    if (finish_) finish_();
  } catch (const TimeoutError& e) {
    fail(e.message(), /*is_timeout=*/true);
  } catch (const Error& e) {
    fail(e.message(), false);
  } catch (const std::exception& e) {
    fail(e.what(), false);
  }
  done_ = true;
  finish_ = nullptr;
  parts_.clear();
  return true;
}

bool CollectiveWork::is_completed() {
  if (done_ || error_) return true;
  for (size_t i = next_part_; i < parts_.size(); ++i) {
    if (!parts_[i]->is_completed()) return false;
  }
  // Done on the wire: run the finishing step now, so the results are where the caller looks.
  try {
    return wait_until(Clock::now());
  } catch (...) {
    return true;   // failed: wait() rethrows the error
  }
}

void CollectiveWork::on_timeout(std::chrono::milliseconds timeout) {
  if (error_) std::rethrow_exception(error_);
  fail(str("did not finish within ", timeout.count() / 1000.0, " s"), true);
}

void CollectiveWork::fail(const std::string& message, bool is_timeout) {
  const std::string who = state_->diagnose(seq_);
  const std::string text =
      str(what_, " (collective #", seq_, ") on rank ", state_->rank(), " ", message, "; ", who,
          ". This communicator cannot be used any more", is_timeout ? "; raise the timeout with "
          "ZEROTRAIN_COMM_TIMEOUT_S or the config's comm.timeout_s if the peers are just slow" : "");
  state_->mark_broken(str(what_, " #", seq_, (is_timeout ? " timed out" : " failed")));
  if (is_timeout) {
    error_ = std::make_exception_ptr(TimeoutError(text));
  } else {
    error_ = std::make_exception_ptr(CommError(text));
  }
  parts_.clear();
  finish_ = nullptr;
  std::rethrow_exception(error_);
}

bool GroupWork::wait_until(Clock::time_point deadline) {
  for (; next_part_ < parts_.size(); ++next_part_) {
    if (!parts_[next_part_]->wait_until(deadline)) return false;
  }
  if (finish_) {
    auto finish = std::move(finish_);
    finish_ = nullptr;
    finish();
  }
  return true;
}

bool GroupWork::is_completed() {
  for (size_t i = next_part_; i < parts_.size(); ++i) {
    if (!parts_[i]->is_completed()) return false;
  }
  try {
    return wait_until(Clock::now());
  } catch (...) {
    return true;
  }
}

}  // namespace zerotrain::comm::detail
