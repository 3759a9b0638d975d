#include "zerotrain/io/from_config.h"

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/io/engine_common.h"

namespace zerotrain::io {

AioOptions aio_options(const config::AioConfig& aio) {
  ZT_CHECK(!aio.use_gds, NotSupported, "aio.use_gds: GPUDirect Storage is not implemented by zerotrain; remove the key");
  ZT_CHECK(aio.block_size > 0 && aio.block_size % kAlignmentBytes == 0, ConfigError, "aio.block_size: must be a "
           "multiple of ", kAlignmentBytes, " bytes for O_DIRECT, got ", aio.block_size,
           "; use 1048576 (DeepSpeed's default) or what `zerotrain io-bench` finds best");
  AioOptions o;
  o.block_size_bytes = aio.block_size;
  o.queue_depth = aio.queue_depth;
  o.threads = aio.intra_op_parallelism;
  o.single_submit = aio.single_submit;
  o.overlap_events = aio.overlap_events;
  // The schema refuses values outside these bounds already; a config built in C++ is held to
  // the same ones here, as a config error, not when the engine starts.
  try {
    detail::check_options(o);
  } catch (const UsageError& e) {
    throw ConfigError("aio: " + e.message());
  }
  if (auto name = env::get(kEngineEnvVar); name && !name->empty()) {
    try {
      o.engine = engine_kind_from_name(*name, kEngineEnvVar);
    } catch (const UsageError& e) {
      throw ConfigError(e.message());
    }
  }
  return o;
}

}  // namespace zerotrain::io
