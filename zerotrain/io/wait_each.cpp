#include <exception>

#include "zerotrain/io/io_engine.h"

namespace zerotrain::io {

void IoEngine::wait_each(const std::vector<Ticket>& tickets) {
  std::exception_ptr first;
  for (Ticket t : tickets) {
    try {
      wait(t);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace zerotrain::io
