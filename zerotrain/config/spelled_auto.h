// The "auto" values a resolution filled (resolve.h), written back into the ds_config as its
// author spelled it: under DeepSpeed's stage3_prefetch_bucket_size when the file says so,
// not under the reader's canonical prefetch_bucket_size. The Python package hands this JSON
// to scripts that read their config after the Trainer filled it (zerotrain.hf's
// HfZeroConfig.config); the engine itself runs the typed Config.
#pragma once

#include "zerotrain/config/config.h"

namespace zerotrain::config {

// `raw` (the JSON the config was read from) with every value `resolved` took from Trainer
// arguments (Source::kAuto) in place of its "auto", at the key `raw` spells it with.
Json with_filled_auto(const Config& resolved, Json raw);

}  // namespace zerotrain::config
