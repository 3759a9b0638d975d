// From the flags of `zerotrain launch` to the processes to supervise: local ranks, one
// node of a multi-node job, a hostfile over ssh, or mpirun (--backend mpi).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/launch/supervisor.h"

namespace zerotrain::launch {

struct LaunchOptions {
  int nproc_per_node = -1;   // -1: not given (1 locally, every slot with a hostfile)
  int nnodes = -1;
  int node_rank = -1;
  std::string master_addr;
  int master_port = 0;       // 0: a free port for a one-node job, 29500 across nodes
  std::string hostfile;
  std::string include;
  std::string exclude;
  bool no_ssh_check = false;
  int ssh_port = 0;
  std::string log_dir;
  std::string backend;       // "" / auto / gloo / mpi: exported as ZEROTRAIN_COMM_BACKEND
  double timeout_s = 0;      // > 0: exported as ZEROTRAIN_COMM_TIMEOUT_S
  double kill_grace_s = 5;
  double signal_grace_s = 120;
  int rank_offset = -1;      // set by the hostfile mode for each node it starts over ssh
  int world_size = -1;
  // Python programs get --local_rank=N as their first argument, as under DeepSpeed's launcher
  // (python_script_argument() below); this turns that off.
  bool no_local_rank = false;
  bool mpi_rank_wrapper = false;   // one rank under mpirun (tools/mpi_rank_main.cpp)
  // The wrapper's: each host's CUDA_VISIBLE_DEVICES, in hostfile order, ';' between hosts
  // ("0,1;2,3"), where --include/--exclude chose slots. Empty: leave the variable alone.
  std::string visible_devices;
  // Exported to every rank as ZEROTRAIN_JOB_TOKEN (zerotrain/comm/rendezvous/job_token.h).
  // Empty: the one in the environment, else a new random one where this launcher starts the
  // whole job (not one node of --nnodes), else none.
  std::string job_token;
  std::vector<std::string> command;
};

SupervisorOptions plan_launch(const LaunchOptions& options);

// Where a rank's command gets DeepSpeed's --local_rank=N: after the script of a Python
// program (PROGRAM ends in .py, or is python with a script, -m MODULE or -c CODE), so the
// index of the argument it goes before; nullopt for any other program (zerotrain's own, a
// shell script).
std::optional<size_t> python_script_argument(const std::vector<std::string>& command);

// 'text' quoted for a POSIX shell.
std::string shell_quote(const std::string& text);

}  // namespace zerotrain::launch
