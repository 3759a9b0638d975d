#include "zerotrain/trainer/memory_check.h"

#include <torch/torch.h>

#include "zerotrain/config/resolve.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/estimate/fit_check.h"

namespace zerotrain::trainer {

void check_memory_fits(const Config& resolved, const estimate::ModelShape& shape, comm::Communicator& comm,
                       const MemoryCheckOptions& options) {
  Config config = resolved;
  config::finalize(config, comm.world_size());   // the micro-batch, as the engine will derive it
  const int on_host = static_cast<int>(
      env::get_int("LOCAL_WORLD_SIZE").value_or(env::get_int("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(comm.world_size())));
  estimate::Setup setup = estimate::setup_from_config(config, comm.world_size());
  setup.activation_checkpointing = options.gradient_checkpointing;
  const auto verdict = estimate::check_fit(
      shape, setup, {.ranks_on_host = std::max(1, on_host), .already_used_bytes = options.used_bytes});
  auto worst = torch::full({1}, static_cast<int64_t>(verdict.kind == estimate::FitVerdict::Kind::kTooLarge), torch::kLong);
  comm.all_reduce(worst, comm::ReduceOp::kMax).wait();
  if (worst.item<int64_t>() > 0) {
    ZT_CHECK(verdict.kind != estimate::FitVerdict::Kind::kTooLarge, ResourceError, "the job does not fit in memory: ",
             verdict.message, ". (--skip_memory_check trains anyway.)");
    throw ResourceError("the job does not fit in memory on another rank's host; its message says what to change");
  }
  if (verdict.kind == estimate::FitVerdict::Kind::kTight && comm.rank() == 0) {
    ZT_LOG_WARN("memory is tight: ", verdict.message);
  }
}

}  // namespace zerotrain::trainer
