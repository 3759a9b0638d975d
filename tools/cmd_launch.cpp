// `zerotrain launch [options] [--] PROGRAM ARGS...`: start the ranks of a job and watch them.
// Flag names follow torchrun and DeepSpeed's launcher (docs/launch.md).
#include <signal.h>
#include <sys/prctl.h>

#include <iostream>
#include <memory>

#include "tools/commands.h"
#include "tools/launch/plan.h"
#include "zerotrain/core/error.h"

namespace zerotrain::tools {
namespace {

// The options whose value is the next word; every other "-x" word is a flag.
bool takes_value(const std::string& word) {
  if (word.find('=') != std::string::npos) return false;
  for (const char* flag : {"--no_ssh_check", "--mpi_rank_wrapper", "-h", "--help"}) {
    if (word == flag) return false;
  }
  return true;
}

std::shared_ptr<launch::LaunchOptions> g_options = std::make_shared<launch::LaunchOptions>();

}  // namespace

std::vector<std::string> split_launch_program(std::vector<std::string>& args) {
  if (args.size() < 2 || args[1] != "launch") return {};
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      std::vector<std::string> program(args.begin() + static_cast<long>(i) + 1, args.end());
      args.resize(i);
      return program;
    }
    if (!word.empty() && word[0] == '-') {
      if (takes_value(word)) ++i;
      continue;
    }
    std::vector<std::string> program(args.begin() + static_cast<long>(i), args.end());
    args.resize(i);
    return program;
  }
  return {};
}

void set_launch_program(std::vector<std::string> program) { g_options->command = std::move(program); }

Command add_launch_command(CLI::App& app) {
  auto options = g_options;
  CLI::App* cmd = app.add_subcommand("launch", "Start the ranks of a distributed job and supervise them");
  cmd->add_option("--nproc_per_node,--num_gpus,--num_procs,--num_accelerators", options->nproc_per_node,
                  "Ranks to start on this node (default 1; with --hostfile: every slot)");
  cmd->add_option("--nnodes,--num_nodes", options->nnodes, "Number of nodes (with --hostfile: use the first N hosts)");
  cmd->add_option("--node_rank", options->node_rank, "This node's index, 0..nnodes-1 (multi-node per-node mode)");
  cmd->add_option("--master_addr", options->master_addr, "Address of the node of rank 0 (default 127.0.0.1)");
  cmd->add_option("--master_port", options->master_port,
                  "Rendezvous port (default: a free port on one node, 29500 across nodes)");
  cmd->add_option("-H,--hostfile", options->hostfile, "DeepSpeed hostfile: one 'HOSTNAME slots=N' per line");
  cmd->add_option("-i,--include", options->include, "Hosts/slots to use: NAME[:SLOT[,SLOT...]][@NAME...]");
  cmd->add_option("-e,--exclude", options->exclude, "Hosts/slots to leave out, same syntax as --include");
  cmd->add_flag("--no_ssh_check", options->no_ssh_check, "Skip the ssh pre-flight of the hostfile's hosts");
  cmd->add_option("--ssh_port", options->ssh_port, "ssh port of the remote hosts");
  cmd->add_option("--log_dir,--enable_each_rank_log", options->log_dir,
                  "Write each rank's output to DIR/rank<N>.log (the console shows it too)");
  cmd->add_option("--backend", options->backend, "Communication backend for the ranks: auto, gloo or mpi "
                  "(mpi starts the ranks through mpirun)");
  cmd->add_option("--timeout_s", options->timeout_s, "Collective timeout for the ranks, in seconds (default 300)");
  cmd->add_option("--kill_grace_s", options->kill_grace_s,
                  "After a rank fails: seconds between SIGTERM and SIGKILL to the others (default 5)");
  cmd->add_option("--rank_offset", options->rank_offset, "Global rank of this node's first rank (set by --hostfile)")
      ->group("");
  cmd->add_option("--world_size", options->world_size, "Total ranks of the job (set by --hostfile)")->group("");
  cmd->add_flag("--mpi_rank_wrapper", options->mpi_rank_wrapper, "internal: one rank under mpirun")->group("");
  cmd->footer("PROGRAM [ARGS...] follows the options (after \"--\" if it starts with a dash); the ranks get "
              "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.");
  return {cmd, [options] {
            if (options->mpi_rank_wrapper) {
              // If mpirun dies (even by SIGKILL), this wrapper hears of it and stops its rank.
              ::prctl(PR_SET_PDEATHSIG, SIGTERM);
              // mpirun may have died before the prctl: then nobody would tell us.
              ZT_CHECK(::getppid() != 1, CommError, "mpirun exited before rank could start");
            }
            return launch::supervise(launch::plan_launch(*options));
          }};
}

}  // namespace zerotrain::tools
