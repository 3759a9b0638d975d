#include "zerotrain/estimate/fit_check.h"

#include <cmath>

#include "zerotrain/core/error.h"
#include "zerotrain/core/host_memory.h"

namespace zerotrain::estimate {
namespace {

using detail::str;

std::string gib(int64_t bytes) {
  return str(std::round(static_cast<double>(bytes) / (1 << 30) * 100) / 100, " GiB");
}

Offload device_of(const auto& block) {
  if (!block) return Offload::kNone;
  switch (block->device) {
    case config::OffloadDevice::kCpu: return Offload::kCpu;
    case config::OffloadDevice::kNvme: return Offload::kNvme;
    case config::OffloadDevice::kNone: break;
  }
  return Offload::kNone;
}

}  // namespace

Setup setup_from_config(const Config& c, int world_size) {
  const auto& z = c.zero_optimization;
  Setup s;
  s.world_size = world_size;
  s.stage = static_cast<int>(z.stage);
  s.precision = c.bf16_enabled() ? Precision::kBf16 : c.fp16_enabled() ? Precision::kFp16 : Precision::kFp32;
  s.offload_optimizer = device_of(z.offload_optimizer);
  s.offload_param = device_of(z.offload_param);
  s.sub_group_size = z.sub_group_size;
  if (z.offload_optimizer) {
    s.buffer_count = z.offload_optimizer->buffer_count;
    s.pipeline_read = z.offload_optimizer->pipeline_read;
    s.pipeline_write = z.offload_optimizer->pipeline_write;
  }
  s.reduce_bucket_size = z.reduce_bucket_size.value;
  s.overlap_comm = z.effective_overlap_comm();
  s.micro_batch = c.train_micro_batch_size_per_gpu.value.value_or(1);
  s.param_persistence_threshold = z.param_persistence_threshold.value;
  s.model_persistence_threshold = z.model_persistence_threshold;
  s.prefetch_bucket_size = z.prefetch_bucket_size.value;
  s.max_live_parameters = z.max_live_parameters;
  s.max_reuse_distance = z.max_reuse_distance;
  s.async_save = c.checkpoint.async_save;
  return s;
}

FitVerdict check_fit(const ModelShape& model, const Setup& setup, const FitOptions& options) {
  FitVerdict verdict;
  const auto available = memory::available();
  if (!available) return verdict;   // kUnknown: nothing to compare with
  // What is still to come: the peak without the runtime, which the process already holds
  // (MemAvailable no longer counts it).
  Setup without_runtime = setup;
  without_runtime.runtime_bytes = 0;
  const int64_t per_rank = estimate(model, without_runtime).peak();
  verdict.needed_bytes = per_rank * options.ranks_on_host;
  verdict.available_bytes = available->bytes;
  const double share = static_cast<double>(verdict.needed_bytes) / static_cast<double>(std::max<int64_t>(1, available->bytes));
  verdict.kind = share > 1.0                    ? FitVerdict::Kind::kTooLarge
                 : share > options.warn_fraction ? FitVerdict::Kind::kTight
                                                 : FitVerdict::Kind::kFits;
  if (verdict.kind == FitVerdict::Kind::kFits) return verdict;

  std::string text = str("the estimated peak needs ", gib(verdict.needed_bytes), " more on this host (",
                         options.ranks_on_host, " rank(s) x ", gib(per_rank), ": ", model.name, ", ZeRO stage ",
                         setup.stage, ", ", to_string(setup.precision), ", micro-batch ", setup.micro_batch,
                         "), and ", gib(available->bytes), " is available (", available->source, ")");
  // The advisor's answer for the memory each rank of this host can have.
  Setup base = setup;
  base.runtime_bytes = std::max(options.already_used_bytes, setup.runtime_bytes);
  const int64_t room_per_rank = available->bytes / options.ranks_on_host + base.runtime_bytes;
  const Advice advice = advise(model, base, {.memory_per_rank = room_per_rank, .ranks_per_node = options.ranks_on_host});
  // Offload to host memory saves nothing here (this host's memory is the ranks' memory), and
  // the advisor counts it apart: only a plain stage is offered.
  const bool plain = advice.setup.offload_optimizer == Offload::kNone && advice.setup.offload_param == Offload::kNone;
  if (advice.fits && plain && (advice.setup.stage != setup.stage || advice.setup.precision != setup.precision)) {
    text += str(". ZeRO stage ", advice.setup.stage, " fits (zerotrain advise); use:\n", advice.config_json);
  } else {
    text += ". Add ranks on more hosts, lower the micro-batch, or train in bf16; `zerotrain advise "
            "--memory_per_rank " + gib(room_per_rank) + "` shows what fits";
  }
  if (verdict.kind == FitVerdict::Kind::kTooLarge && !setup.activation_checkpointing) {
    Setup checkpointed = without_runtime;
    checkpointed.activation_checkpointing = true;
    const int64_t checkpointed_bytes = estimate(model, checkpointed).peak() * options.ranks_on_host;
    if (checkpointed_bytes <= available->bytes && checkpointed_bytes < verdict.needed_bytes) {
      text += str(". With gradient checkpointing (--gradient_checkpointing) it needs ", gib(checkpointed_bytes),
                  " and fits");
    }
  }
  verdict.message = text;
  return verdict;
}

}  // namespace zerotrain::estimate
