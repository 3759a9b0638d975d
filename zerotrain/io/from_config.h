// The IO engine's options from DeepSpeed's top-level `aio` block (DeepSpeed's
// aio config) and the environment (docs/io.md).
#pragma once

#include "zerotrain/config/schema_zero.h"
#include "zerotrain/io/io_engine.h"

namespace zerotrain::io {

// ZEROTRAIN_IO_ENGINE=auto|io_uring|libaio|threads picks the engine (default auto).
inline constexpr const char* kEngineEnvVar = "ZEROTRAIN_IO_ENGINE";

// block_size, queue_depth, intra_op_parallelism (alias thread_count), single_submit and
// overlap_events map one to one. ConfigError for a block_size that O_DIRECT cannot use (not
// a multiple of 4096) and for a bad ZEROTRAIN_IO_ENGINE; NotSupported for use_gds (the
// config reader refuses it already; kept for configs built in C++).
AioOptions aio_options(const config::AioConfig& aio);

}  // namespace zerotrain::io
