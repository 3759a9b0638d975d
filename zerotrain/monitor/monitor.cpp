#include "zerotrain/monitor/monitor.h"

#include "zerotrain/core/error.h"

namespace zerotrain::monitor {

void Monitor::add(std::unique_ptr<Writer> writer) {
  ZT_INTERNAL_ASSERT(writer != nullptr, "Monitor::add given no writer");
  writers_.push_back(std::move(writer));
}

void Monitor::write(int64_t step, const std::vector<Scalar>& scalars) {
  if (scalars.empty()) return;
  for (auto& w : writers_) w->write(step, scalars);
}

void Monitor::flush() {
  for (auto& w : writers_) w->flush();
}

std::vector<std::string> Monitor::destinations() const {
  std::vector<std::string> out;
  out.reserve(writers_.size());
  for (const auto& w : writers_) out.push_back(w->where());
  return out;
}

}  // namespace zerotrain::monitor
