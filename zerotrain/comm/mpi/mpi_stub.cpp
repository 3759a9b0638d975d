// Built when no MPI library was found at configure time.
#include "zerotrain/comm/mpi/mpi_backend.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

bool mpi_compiled() { return false; }

std::unique_ptr<Backend> make_mpi_backend(const RendezvousInfo&, const CommOptions&) {
  throw NotSupported("this zerotrain was built without MPI; install libopenmpi-dev and rebuild "
                     "(scripts/setup.sh does both), or use the gloo backend");
}

}  // namespace zerotrain::comm::detail
