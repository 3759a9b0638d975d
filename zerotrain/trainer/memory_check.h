// The estimator's peak against what this host has left, before the model is built: a job
// that cannot fit is refused with what would.
#pragma once

#include <cstdint>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/estimate/detailed.h"

namespace zerotrain::trainer {

struct MemoryCheckOptions {
  int64_t used_bytes = 0;                 // what the process holds already (LibTorch, the communicator)
  bool gradient_checkpointing = false;    // --gradient_checkpointing: the activations the model keeps with it
};

// Every rank agrees: one too-large verdict stops all of them, so none waits for the others
// in a collective.
void check_memory_fits(const Config& resolved, const estimate::ModelShape& shape, comm::Communicator& comm,
                       const MemoryCheckOptions& options);

}  // namespace zerotrain::trainer
