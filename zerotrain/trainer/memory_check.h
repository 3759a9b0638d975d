// The estimator's peak against what this host has left, before the model is built: a job
// that cannot fit is refused with what would.
#pragma once

#include <cstdint>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/estimate/detailed.h"

namespace zerotrain::trainer {

// Every rank agrees: one too-large verdict stops all of them, so none waits for the others
// in a collective. `used_bytes`: what the process holds already (LibTorch, the communicator).
void check_memory_fits(const Config& resolved, const estimate::ModelShape& shape, comm::Communicator& comm,
                       int64_t used_bytes);

}  // namespace zerotrain::trainer
