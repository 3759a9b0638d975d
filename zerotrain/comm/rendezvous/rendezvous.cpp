#include "zerotrain/comm/rendezvous/rendezvous.h"

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm {
namespace {

int required_int(const char* name, const char* because) {
  auto value = env::get_int(name);
  ZT_CHECK(value.has_value(), ConfigError, name, " is not set, but ", because,
           "; set it, or unset the launcher variables to run as a single process");
  return static_cast<int>(*value);
}

int int_or(const char* name, int fallback) {
  auto value = env::get_int(name);
  return value ? static_cast<int>(*value) : fallback;
}

// The first host of a Slurm node list: "node[01-04,07],gpu2" -> "node01".
std::string first_slurm_host(const std::string& list) {
  std::string host;
  for (size_t i = 0; i < list.size(); ++i) {
    char c = list[i];
    if (c == ',') break;
    if (c == '[') {
      size_t end = list.find_first_of(",-]", i + 1);
      host += list.substr(i + 1, end - i - 1);
      break;
    }
    host += c;
  }
  return host;
}

void fill_master(RendezvousInfo& info) {
  info.master_addr = env::get("MASTER_ADDR").value_or("");
  info.master_port = int_or("MASTER_PORT", 0);
}

void check(const RendezvousInfo& info, const char* rank_var, const char* size_var) {
  ZT_CHECK(info.world_size >= 1, ConfigError, size_var, "=", info.world_size, ": must be at least 1");
  ZT_CHECK(info.rank >= 0 && info.rank < info.world_size, ConfigError, rank_var, "=", info.rank,
           " is outside the world of ", size_var, "=", info.world_size);
  ZT_CHECK(info.local_world_size >= 1 && info.local_rank >= 0 && info.local_rank < info.local_world_size,
           ConfigError, "local rank ", info.local_rank, " is outside the ", info.local_world_size,
           " local ranks the launcher reported");
}

// True when RANK/WORLD_SIZE only repeat what mpirun set (`zerotrain launch` under mpirun
// sets both, for programs that read RANK): the process belongs to mpirun's world.
bool rank_copies_mpirun() {
  const auto ompi_rank = env::get("OMPI_COMM_WORLD_RANK");
  return ompi_rank && env::get("RANK") == ompi_rank && env::get("WORLD_SIZE") == env::get("OMPI_COMM_WORLD_SIZE");
}

}  // namespace

const char* to_string(LaunchSource source) {
  switch (source) {
    case LaunchSource::kNone: return "none";
    case LaunchSource::kTorchrun: return "torchrun";
    case LaunchSource::kSlurm: return "slurm";
    case LaunchSource::kOpenMpi: return "openmpi";
  }
  return "?";
}

RendezvousInfo rendezvous_from_env() {
  RendezvousInfo info;
  if (env::get("RANK") && !rank_copies_mpirun()) {
    // torchrun, DeepSpeed's launcher and `zerotrain launch`. DeepSpeed's launcher sets
    // LOCAL_SIZE where torchrun sets LOCAL_WORLD_SIZE.
    info.source = LaunchSource::kTorchrun;
    info.rank = required_int("RANK", "RANK is");
    info.world_size = required_int("WORLD_SIZE", "RANK is");
    info.local_rank = int_or("LOCAL_RANK", info.world_size == 1 ? 0 : info.rank);
    info.local_world_size = int_or("LOCAL_WORLD_SIZE", int_or("LOCAL_SIZE", info.world_size));
    fill_master(info);
    check(info, "RANK", "WORLD_SIZE");
    return info;
  }
  if (env::get("OMPI_COMM_WORLD_RANK")) {
    info.source = LaunchSource::kOpenMpi;
    info.rank = required_int("OMPI_COMM_WORLD_RANK", "mpirun set OMPI_COMM_WORLD_RANK");
    info.world_size = required_int("OMPI_COMM_WORLD_SIZE", "mpirun set OMPI_COMM_WORLD_RANK");
    info.local_rank = int_or("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    info.local_world_size = int_or("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    fill_master(info);
    check(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    return info;
  }
  if (env::get("SLURM_PROCID") && env::get("SLURM_NTASKS")) {
    info.source = LaunchSource::kSlurm;
    info.rank = required_int("SLURM_PROCID", "SLURM_PROCID is");
    info.world_size = required_int("SLURM_NTASKS", "SLURM_PROCID is");
    info.local_rank = int_or("SLURM_LOCALID", 0);
    // SLURM_NTASKS_PER_NODE is only set with --ntasks-per-node; without it assume one node.
    info.local_world_size = int_or("SLURM_NTASKS_PER_NODE", info.world_size);
    fill_master(info);
    if (info.master_addr.empty()) {
      info.master_addr = first_slurm_host(env::get("SLURM_STEP_NODELIST")
                                              .value_or(env::get("SLURM_JOB_NODELIST").value_or("")));
    }
    if (info.master_port == 0) info.master_port = 29500;   // torch.distributed's default
    check(info, "SLURM_PROCID", "SLURM_NTASKS");
    return info;
  }
  return info;
}

}  // namespace zerotrain::comm
