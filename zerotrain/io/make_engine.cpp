// Choosing an engine: the one asked for, or (auto) the first that this build has and this
// kernel allows, in the order io_uring, libaio, threads.
#include <string>
#include <vector>

#include "zerotrain/config/schema_zero.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/io/engine_common.h"

namespace zerotrain::io {
namespace {

constexpr EngineKind kNamed[] = {EngineKind::kAuto, EngineKind::kIoUring, EngineKind::kLibaio, EngineKind::kThreads};

std::unique_ptr<IoEngine> make_kind(EngineKind kind, const AioOptions& options) {
  switch (kind) {
    case EngineKind::kIoUring: return detail::make_uring_engine(options);
    case EngineKind::kLibaio: return detail::make_libaio_engine(options);
    case EngineKind::kThreads: return detail::make_threads_engine(options);
    case EngineKind::kAuto: break;
  }
  ZT_INTERNAL_ASSERT(false, "make_kind(kAuto)");
}

}  // namespace

namespace detail {

void check_options(const AioOptions& o) {
  using Bounds = config::AioConfig;
  static_assert(Bounds::kMinBlockSizeBytes == kAlignmentBytes, "a piece is whole O_DIRECT blocks");
  ZT_CHECK(o.block_size_bytes >= Bounds::kMinBlockSizeBytes && o.block_size_bytes % kAlignmentBytes == 0, UsageError,
           "io block size ", o.block_size_bytes, " bytes: must be a positive multiple of ", kAlignmentBytes,
           " (O_DIRECT); DeepSpeed's default is 1048576");
  ZT_CHECK(o.block_size_bytes <= Bounds::kMaxBlockSizeBytes, UsageError, "io block size ", o.block_size_bytes,
           " bytes: at most ", Bounds::kMaxBlockSizeBytes, " (1 GiB) per piece; 1 MiB to 8 MiB is what disks like");
  ZT_CHECK(o.queue_depth >= 1 && o.queue_depth <= Bounds::kMaxQueueDepth, UsageError, "io queue depth ", o.queue_depth,
           ": must be between 1 and ", Bounds::kMaxQueueDepth);
  ZT_CHECK(o.threads >= 1 && o.threads <= Bounds::kMaxThreads, UsageError, "io threads ", o.threads,
           ": must be between 1 and ", Bounds::kMaxThreads);
}

}  // namespace detail

const char* engine_kind_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::kAuto: return "auto";
    case EngineKind::kIoUring: return "io_uring";
    case EngineKind::kLibaio: return "libaio";
    case EngineKind::kThreads: return "threads";
  }
  return "?";
}

EngineKind engine_kind_from_name(const std::string& name, const std::string& what) {
  for (EngineKind k : kNamed) {
    if (name == engine_kind_name(k)) return k;
  }
  throw UsageError(zerotrain::detail::str(what, ": unknown io engine \"", name,
                                          "\"; use auto, io_uring, libaio or threads"));
}

std::unique_ptr<IoEngine> make_io_engine(const AioOptions& options) {
  detail::check_options(options);
  if (options.engine != EngineKind::kAuto) {
    try {
      return make_kind(options.engine, options);
    } catch (const NotSupported& e) {
      std::vector<std::string> can;
      for (const EngineProbe& p : probe_engines()) {
        if (p.available) can.push_back(engine_kind_name(p.kind));
      }
      throw NotSupported(e.message() + "; the engines that run here: " + strings::join_words(can, " and ") +
                         " (or auto, which picks the first of them)");
    }
  }
  // Each engine's constructor asks the kernel, so a refusal falls through to the next.
  for (EngineKind k : {EngineKind::kIoUring, EngineKind::kLibaio}) {
    try {
      return make_kind(k, options);
    } catch (const NotSupported&) {
    }
  }
  return detail::make_threads_engine(options);
}

std::vector<EngineProbe> probe_engines() {
  return {detail::probe_uring(), detail::probe_libaio(), detail::probe_threads()};
}

}  // namespace zerotrain::io
