// `zerotrain launch [options] [--] PROGRAM ARGS...`: start the ranks of a job and watch them.
// Flag names follow torchrun and DeepSpeed's launcher (docs/launch.md).
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

#include "tools/commands.h"
#include "tools/launch/plan.h"
#include "zerotrain/core/error.h"

namespace zerotrain::tools {
namespace {

// The options whose value is the next word; every other "-x" word is a flag.
bool takes_value(const std::string& word) {
  if (word.find('=') != std::string::npos) return false;
  for (const char* flag : {"--no_ssh_check", "--no_local_rank", "-h", "--help"}) {
    if (word == flag) return false;
  }
  return true;
}

std::shared_ptr<launch::LaunchOptions> g_options = std::make_shared<launch::LaunchOptions>();

// Refuses a value of `flag` given on the command line that is not a finite number in
// [lo, hi]: CLI11 runs a validator on given values only, so the options' "not given"
// defaults (-1, 0) are never refused, and an explicit value is never replaced by one.
// Integer options refuse a fraction when CLI11 converts the value. The error names the
// flag itself (CLI11 leaves the name of a hidden option out of a ValidationError's message,
// and would catch one thrown here), and exits with 2 like any parse error.
CLI::Validator in_range(const std::string& flag, double lo, double hi, const std::string& allowed) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && end == text.c_str() + text.size();
        if (number && std::isfinite(value) && value >= lo && value <= hi) return {};
        throw CLI::ParseError(flag + ": must be " + allowed + ", got " + text, CLI::ExitCodes::ValidationError);
      },
      allowed);
}

constexpr double kMaxInt = std::numeric_limits<int>::max();
constexpr double kMaxSeconds = 1e9;   // ~30 years; the values become int64 milliseconds and seconds

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
  const auto count = [](const char* flag) { return in_range(flag, 1, kMaxInt, "at least 1"); };
  const auto index = [](const char* flag) { return in_range(flag, 0, kMaxInt, "at least 0"); };
  const auto port = [](const char* flag) { return in_range(flag, 1, 65535, "a port between 1 and 65535"); };
  cmd->add_option("--nproc_per_node,--num_gpus,--num_procs,--num_accelerators", options->nproc_per_node,
                  "Ranks to start on this node (default 1; with --hostfile: every slot)")
      ->check(count("--nproc_per_node"));
  cmd->add_option("--nnodes,--num_nodes", options->nnodes, "Number of nodes (with --hostfile: use the first N hosts)")
      ->check(count("--nnodes"));
  cmd->add_option("--node_rank", options->node_rank, "This node's index, 0..nnodes-1 (multi-node per-node mode)")
      ->check(index("--node_rank"));
  cmd->add_option("--master_addr", options->master_addr, "Address of the node of rank 0 (default 127.0.0.1)");
  cmd->add_option("--master_port", options->master_port,
                  "Rendezvous port (default: a free port on one node, 29500 across nodes)")
      ->check(port("--master_port"));
  cmd->add_option("-H,--hostfile", options->hostfile, "DeepSpeed hostfile: one 'HOSTNAME slots=N' per line");
  cmd->add_option("-i,--include", options->include, "Hosts/slots to use: NAME[:SLOT[,SLOT...]][@NAME...]");
  cmd->add_option("-e,--exclude", options->exclude, "Hosts/slots to leave out, same syntax as --include");
  cmd->add_flag("--no_ssh_check", options->no_ssh_check, "Skip the ssh pre-flight of the hostfile's hosts");
  cmd->add_flag("--no_local_rank", options->no_local_rank,
                "Do not give a Python program --local_rank=N as its first argument (DeepSpeed's launcher does)");
  cmd->add_option("--ssh_port", options->ssh_port, "ssh port of the remote hosts")->check(port("--ssh_port"));
  cmd->add_option("--log_dir,--enable_each_rank_log", options->log_dir,
                  "Write each rank's output to DIR/rank<N>.log (the console shows it too)");
  cmd->add_option("--backend", options->backend, "Communication backend for the ranks: auto, gloo, mpi, nccl or shm "
                  "(mpi starts the ranks through mpirun; nccl needs a GPU per rank)");
  // denorm_min: the smallest double above 0, so 0 itself is refused.
  cmd->add_option("--timeout_s", options->timeout_s, "Collective timeout for the ranks, in seconds (default 300)")
      ->check(in_range("--timeout_s", std::numeric_limits<double>::denorm_min(), kMaxSeconds,
                       "a number of seconds above 0, up to 1e9"));
  cmd->add_option("--kill_grace_s", options->kill_grace_s,
                  "After a rank fails: seconds between SIGTERM and SIGKILL to the others (default 5)")
      ->check(in_range("--kill_grace_s", 0, kMaxSeconds, "a number of seconds from 0 to 1e9"));
  cmd->add_option("--signal_grace_s", options->signal_grace_s,
                  "After SIGTERM, SIGINT, SIGHUP or SIGUSR1 to the launcher (passed on to the ranks): seconds they "
                  "have to save a checkpoint before SIGKILL (default 120)")
      ->check(in_range("--signal_grace_s", 0, kMaxSeconds, "a number of seconds from 0 to 1e9"));
  cmd->add_option("--rank_offset", options->rank_offset, "Global rank of this node's first rank (set by --hostfile)")
      ->check(index("--rank_offset"))
      ->group("");
  cmd->add_option("--world_size", options->world_size, "Total ranks of the job (set by --hostfile)")
      ->check(count("--world_size"))
      ->group("");
  cmd->footer("PROGRAM [ARGS...] follows the options (after \"--\" if it starts with a dash); the ranks get "
              "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.");
  return {cmd, [options] { return launch::supervise(launch::plan_launch(*options)); }};
}

}  // namespace zerotrain::tools
