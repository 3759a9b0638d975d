// comm/rendezvous/: how the ranks meet: the launchers' environment, the store, the job token.
//
// Where this process sits in the job, read from the environment that the launchers set:
// torchrun / DeepSpeed / `zerotrain launch` (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, ...) and OpenMPI's mpirun
// (OMPI_COMM_WORLD_*). With none of them the process is a world of one.
#pragma once

#include <string>

namespace zerotrain::comm {

enum class LaunchSource { kNone, kTorchrun, kSlurm, kOpenMpi };
const char* to_string(LaunchSource source);

struct RendezvousInfo {
  LaunchSource source = LaunchSource::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Where rank 0 serves the rendezvous store; empty when the source does not say
  // (mpirun: the MPI backend needs none, Gloo then asks for MASTER_ADDR).
  std::string master_addr;
  int master_port = 0;
};

// Throws ConfigError naming the variable when a value is missing or inconsistent
// (RANK without WORLD_SIZE, RANK >= WORLD_SIZE, a non-integer, ...).
RendezvousInfo rendezvous_from_env();

}  // namespace zerotrain::comm
