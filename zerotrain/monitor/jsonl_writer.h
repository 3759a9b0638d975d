// JSON lines: one object per logging event, {"step": N, "<tag>": value, ...}, the tags in
// the order given. A value that is not finite is written as null (JSON has no NaN).
// make_jsonl_writer() is in monitor.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/monitor/monitor.h"

namespace zerotrain::monitor::jsonl {

std::string format_line(int64_t step, const std::vector<Scalar>& scalars);   // with its "\n"

}  // namespace zerotrain::monitor::jsonl
