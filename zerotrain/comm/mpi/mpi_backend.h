// comm/mpi/: the MPI transport (CPU) over OpenMPI, or its stub where no MPI was found.
// Internal to comm/: Communicator::init opens it from the table in transports.cpp.
#pragma once

#include <memory>

#include "zerotrain/comm/backend.h"

namespace zerotrain::comm::detail {

// Joins the world that mpirun made; throws ConfigError for a process that mpirun did not
// start, and NotSupported where this build has no MPI (mpi_stub.cpp).
std::unique_ptr<Backend> make_mpi_backend(const RendezvousInfo& where, const CommOptions& options);
// Whether this build has MPI (mpi_backend.cpp) or only the stub (mpi_stub.cpp).
bool mpi_compiled();

}  // namespace zerotrain::comm::detail
