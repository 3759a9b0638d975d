// zerotrain's C++ API in one header: what a project that uses the installed library includes
// (find_package(zerotrain) and zerotrain::zerotrain; docs/building.md). Every header it
// reaches is installed; no other header is.
//
//   #include <zerotrain/zerotrain.h>
//   auto engine = zerotrain::initialize(model, zerotrain::Config::from_file("ds_config.json"));
//   engine.backward(loss);
//   engine.step();
#pragma once

#include "zerotrain/version.h"                    // ZEROTRAIN_VERSION and the build facts

#include "zerotrain/core/error.h"                 // the typed errors: ConfigError, CommError, ...
#include "zerotrain/core/logging.h"               // the log level and ZT_LOG_*

#include "zerotrain/config/config.h"              // Config::from_file: a ds_config.json, checked
#include "zerotrain/config/resolve.h"             // "auto" values and the batch triangle

#include "zerotrain/comm/communicator.h"          // Communicator: collectives with timeouts
#include "zerotrain/comm/rendezvous/rendezvous.h"  // where this rank is (the launchers' environment)

#include "zerotrain/engine/engine.h"              // initialize, Engine, ZeroInit, GatheredParameters
#include "zerotrain/stages/stage3/sharded.h"      // Sharded<M>: a unit of ZeRO stage 3

#include "zerotrain/checkpoint/consolidate.h"     // zero-to-fp32: one model from a sharded checkpoint
#include "zerotrain/checkpoint/locate.h"          // the tags of a checkpoint folder

#include "zerotrain/estimate/deepspeed_estimator.h"   // DeepSpeed's memory estimators
#include "zerotrain/estimate/detailed.h"              // the detailed estimate and the stage advisor

#include "zerotrain/data/open.h"                  // the datasets of `zerotrain train`
#include "zerotrain/models/models.h"              // the built-in models (mlp, convnet, gpt)
#include "zerotrain/trainer/trainer.h"            // Trainer and TrainingArguments
