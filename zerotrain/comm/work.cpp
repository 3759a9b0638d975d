#include "zerotrain/comm/work.h"

#include <exception>

#include "zerotrain/core/error.h"

namespace zerotrain::comm {

void Work::wait() {
  if (impl_) wait(impl_->default_timeout());
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (!impl_) return;
  if (!impl_->wait_until(detail::WorkImpl::Clock::now() + timeout)) impl_->on_timeout(timeout);
}

bool Work::is_completed() const { return !impl_ || impl_->is_completed(); }

void wait_all(std::initializer_list<Work*> works) { wait_all(std::vector<Work*>(works)); }

void wait_all(std::vector<Work>& works) {
  std::vector<Work*> pointers;
  for (Work& work : works) pointers.push_back(&work);
  wait_all(pointers);
}

void wait_all(const std::vector<Work*>& works) {
  std::exception_ptr first;
  for (Work* work : works) {
    try {
      work->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

namespace detail {
void WorkImpl::on_timeout(std::chrono::milliseconds timeout) {
  throw TimeoutError(str("a communication operation did not finish within ", timeout.count(), " ms"));
}
}  // namespace detail

}  // namespace zerotrain::comm
