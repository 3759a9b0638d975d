// offload_param.device "nvme": the stage-3 parameter shard in one file per group under
// nvme_path, each bucket's chunk in its own aligned slot (docs/offload.md).
#pragma once

#include <memory>
#include <string>

#include "zerotrain/io/io_engine.h"
#include "zerotrain/stages/stage3/param_swap.h"

namespace zerotrain::offload {

std::unique_ptr<stages::stage3::ParamSwap> make_nvme_param_swap(const std::string& dir, const io::AioOptions& aio);

}  // namespace zerotrain::offload
