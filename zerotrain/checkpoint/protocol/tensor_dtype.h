// LibTorch's dtypes and the checkpoint files' (safetensors) dtypes, both ways.
#pragma once

#include <c10/core/ScalarType.h>

#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::checkpoint {

Dtype checkpoint_dtype(at::ScalarType type);   // UsageError for a dtype safetensors lacks
at::ScalarType scalar_type(Dtype dtype);

}  // namespace zerotrain::checkpoint
