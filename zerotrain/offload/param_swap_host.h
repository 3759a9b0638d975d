// offload_param.device "cpu" on a GPU (ZeRO-Offload's parameter half): the stage-3 parameter
// shard lives in pinned host memory, one chunk per bucket, and each unit's chunk is uploaded
// asynchronously when its gather is scheduled (the prefetch), so the GPU holds only the
// units in flight. On a CPU the shard is in host memory already and no swap is made.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "zerotrain/stages/stage3/param_swap.h"

namespace zerotrain::offload {

std::unique_ptr<stages::stage3::ParamSwap> make_host_param_swap(c10::Device device);

}  // namespace zerotrain::offload
