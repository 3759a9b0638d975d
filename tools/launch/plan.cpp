#include "tools/launch/plan.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "tools/launch/hostfile.h"
#include "tools/launch/port_reservation.h"
#include "tools/launch/rank_threads.h"
#include "tools/launch/reaper.h"
#include "zerotrain/comm/types.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/text_file.h"

extern char** environ;

namespace zerotrain::launch {
namespace {

using detail::str;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr int kDefaultMultiNodePort = 29500;   // torch.distributed's and DeepSpeed's default
#ifdef ZEROTRAIN_HAVE_MPI
constexpr bool kMpiBuilt = true;
#else
constexpr bool kMpiBuilt = false;
#endif

std::string self_exe() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  ZT_CHECK(!ec, IoError, "cannot find the zerotrain executable (/proc/self/exe): ", ec.message());
  return path.string();
}

// The program mpirun runs for each rank (tools/mpi_rank_main.cpp): next to zerotrain, on
// every host. Without it, mpirun says which executable it could not run.
std::string mpi_rank_exe() { return (std::filesystem::path(self_exe()).parent_path() / "zerotrain-mpi-rank").string(); }

// Variables the ranks get from the launch flags, beside the rendezvous ones.
Env comm_env(const LaunchOptions& o) {
  Env env;
  if (!o.backend.empty()) {
    // Rejected here, not in every rank.
    ZT_CHECK(comm::parse_backend(o.backend, "--backend") != comm::BackendKind::kThreads, UsageError,
             "--backend threads: the threads backend joins threads of one process; launched ranks use gloo or mpi");
    env.emplace_back("ZEROTRAIN_COMM_BACKEND", o.backend);
  }
  // Whole seconds, rounded up: a timeout the user gave never becomes 0 (no timeout) on the way.
  if (o.timeout_s > 0) env.emplace_back("ZEROTRAIN_COMM_TIMEOUT_S", str(static_cast<int64_t>(std::ceil(o.timeout_s))));
  if (!o.job_token.empty()) env.emplace_back("ZEROTRAIN_JOB_TOKEN", o.job_token);
  return env;
}

// 128 random bits, in hex: the ranks of one job present it to each other at the rendezvous
// (zerotrain/comm/rendezvous/job_token.h), so that a rank of another job given the same port
// stops there.
std::string random_job_token() {
  unsigned char bits[16];
  ZT_CHECK(::getrandom(bits, sizeof(bits), 0) == static_cast<ssize_t>(sizeof(bits)), IoError,
           "cannot read random bytes for the job token (getrandom): ", std::strerror(errno));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bits) token += {kHex[b >> 4], kHex[b & 15]};
  return token;
}

// The job's token: the user's or a parent launcher's (ZEROTRAIN_JOB_TOKEN), else a new one
// where this launcher starts every rank of the job. One node of a job started node by node
// (--nnodes without a hostfile) cannot agree on one with the others: none.
std::string job_token_of(const LaunchOptions& o) {
  if (!o.job_token.empty()) return o.job_token;
  if (auto given = env::get("ZEROTRAIN_JOB_TOKEN"); given && !given->empty()) return *given;
  const bool one_node_of_many = (o.hostfile.empty() && o.nnodes > 1) || o.world_size > 0;
  return one_node_of_many ? "" : random_job_token();
}

// Every rank on this host: NCCL's sockets (its bootstrap, its socket transport) on loopback.
// NCCL would otherwise pick a network interface (it prefers any to lo) and listen there.
// Gloo needs nothing: it listens on the interface that routes to MASTER_ADDR, 127.0.0.1.
void add_single_host_env(Env& env) {
  if (!env::get("NCCL_SOCKET_IFNAME")) env.emplace_back("NCCL_SOCKET_IFNAME", "lo");
}

// mpirun's settings for a job on this host only: MPI's traffic stays inside the host.
// OpenMPI's TCP transport listens on every interface whatever its if_include says (measured
// with 4.1), so on one host it is left out: shared memory (vader, "sm" in OpenMPI 5, which
// takes the old name too) and self carry everything, under ob1, the pml that uses that list
// (ucx and cm bring transports of their own). The if_include settings keep the TCP transport
// and mpirun's out-of-band channel on loopback where the user brings TCP back. A setting the
// user made in the environment (OMPI_MCA_<name>, or the exclude list that excludes an
// include list) is theirs.
std::vector<std::string> single_host_mca_args() {
  const std::pair<const char*, const char*> settings[] = {
      {"pml", "ob1"}, {"btl", "self,vader"}, {"btl_tcp_if_include", "lo"}, {"oob_tcp_if_include", "lo"}};
  auto user_set = [](const std::string& name) { return env::get(("OMPI_MCA_" + name).c_str()).has_value(); };
  std::vector<std::string> args;
  for (const auto& [name, value] : settings) {
    std::string exclude = name;
    if (exclude.ends_with("_if_include")) exclude.replace(exclude.size() - 7, 7, "exclude");
    if (user_set(name) || user_set(exclude)) continue;
    args.insert(args.end(), {"--mca", name, value});
  }
  return args;
}

// A free port for the rendezvous store, held in the plan until the job ends (port_reservation.h).
int hold_a_port(SupervisorOptions& plan) {
  if (!plan.master_port) plan.master_port = std::make_shared<const PortReservation>();
  return plan.master_port->port();
}

// "1,3": a CUDA_VISIBLE_DEVICES value.
std::string join_slots(const std::vector<int>& slots) {
  std::string text;
  for (int slot : slots) text += (text.empty() ? "" : ",") + str(slot);
  return text;
}

// The rank's command: DeepSpeed's launcher gives a Python script --local_rank=N.
std::vector<std::string> rank_command(const LaunchOptions& o, int local_rank) {
  std::vector<std::string> argv = o.command;
  if (o.no_local_rank) return argv;
  if (auto at = python_script_argument(argv)) {
    argv.insert(argv.begin() + static_cast<long>(*at), str("--local_rank=", local_rank));
  }
  return argv;
}

// Under mpirun, the CUDA_VISIBLE_DEVICES of the wrapper's rank: its host's entry of
// `per_host` ("0,1;2,3", hostfile order). mpirun fills the hosts in hostfile order, each up to
// its slots, so global ranks map to hosts as they do in the hostfile.
std::string visible_devices_of_rank(const std::string& per_host, int rank, int local_rank) {
  int offset = 0;
  size_t start = 0;
  while (start <= per_host.size()) {
    const size_t end = std::min(per_host.find(';', start), per_host.size());
    const std::string devices = per_host.substr(start, end - start);
    const int count = static_cast<int>(std::count(devices.begin(), devices.end(), ',')) + 1;
    if (rank < offset + count) {
      ZT_CHECK(rank - offset == local_rank, UsageError, "mpirun placed rank ", rank, " as local rank ", local_rank,
               " of its host, where the hostfile's order puts it at ", rank - offset, ", so the slots chosen with "
               "--include/--exclude cannot be matched to it; use --backend gloo, or mpirun's default mapping");
      return devices;
    }
    offset += count;
    start = end + 1;
  }
  throw UsageError(str("rank ", rank, " is beyond the ", offset, " slots chosen with --include/--exclude"));
}

struct NodeLayout {
  int nnodes = 1;
  int node_rank = 0;
  int nproc = 1;
  int rank_offset = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;   // 0: this launcher holds one (a job of one node, started whole)
  std::vector<int> devices;   // CUDA_VISIBLE_DEVICES for every rank (--include/--exclude); empty: unset
};

void add_rank_children(SupervisorOptions& plan, const LaunchOptions& o, const NodeLayout& node) {
  // Before the plan holds a child per rank: a count that cannot start is refused while small.
  reserve_descriptors(node.nproc, !o.log_dir.empty(), 0, node.nproc);
  const auto threads = omp_threads_per_rank(node.nproc);
  if (threads) plan.notices.push_back(omp_threads_notice(*threads, node.nproc));
  const int master_port = node.master_port > 0 ? node.master_port : hold_a_port(plan);
  for (int local = 0; local < node.nproc; ++local) {
    const int rank = node.rank_offset + local;
    ChildSpec child{str("rank ", rank), str("rank", rank, ".log"), rank_command(o, local), comm_env(o)};
    if (node.nnodes == 1 && node.world_size == node.nproc) add_single_host_env(child.env);
    // DeepSpeed's launcher: every rank of a node sees the node's chosen slots.
    if (!node.devices.empty()) child.env.emplace_back("CUDA_VISIBLE_DEVICES", join_slots(node.devices));
    if (threads) child.env.emplace_back("OMP_NUM_THREADS", *threads);
    // torchrun's names, and DeepSpeed's launcher's (LOCAL_SIZE, CROSS_RANK, CROSS_SIZE).
    Env rendezvous = {{"RANK", str(rank)},
                      {"WORLD_SIZE", str(node.world_size)},
                      {"LOCAL_RANK", str(local)},
                      {"LOCAL_WORLD_SIZE", str(node.nproc)},
                      {"LOCAL_SIZE", str(node.nproc)},
                      {"GROUP_RANK", str(node.node_rank)},
                      {"CROSS_RANK", str(node.node_rank)},
                      {"CROSS_SIZE", str(node.nnodes)},
                      {"MASTER_ADDR", node.master_addr},
                      {"MASTER_PORT", str(master_port)}};
    child.env.insert(child.env.end(), rendezvous.begin(), rendezvous.end());
    plan.children.push_back(std::move(child));
  }
}

NodeLayout per_node_layout(const LaunchOptions& o) {
  NodeLayout node;
  node.nproc = o.nproc_per_node < 0 ? 1 : o.nproc_per_node;
  node.nnodes = o.nnodes < 0 ? 1 : o.nnodes;
  ZT_CHECK(node.nproc >= 1, UsageError, "--nproc_per_node ", node.nproc, ": give at least 1");
  ZT_CHECK(node.nnodes >= 1, UsageError, "--nnodes ", node.nnodes, ": give at least 1");
  if (node.nnodes > 1) {
    ZT_CHECK(o.node_rank >= 0, UsageError, "--nnodes ", node.nnodes,
             " needs --node_rank (0 on the node of rank 0, then 1, 2, ...) on every node");
    ZT_CHECK(!o.master_addr.empty(), UsageError, "--nnodes ", node.nnodes,
             " needs --master_addr: the address of node 0 that every node can reach");
  }
  node.node_rank = o.node_rank < 0 ? 0 : o.node_rank;
  ZT_CHECK(node.node_rank < node.nnodes, UsageError, "--node_rank ", node.node_rank, " is not below --nnodes ",
           node.nnodes);
  if (!o.master_addr.empty()) node.master_addr = o.master_addr;
  node.master_port = o.master_port > 0                       ? o.master_port
                     : (node.nnodes == 1 && o.world_size < 0) ? 0
                                                              : kDefaultMultiNodePort;
  const int64_t world_size = o.world_size > 0 ? o.world_size : int64_t{node.nnodes} * node.nproc;
  ZT_CHECK(world_size <= std::numeric_limits<int>::max(), UsageError, "--nnodes ", node.nnodes, " x --nproc_per_node ",
           node.nproc, " ranks is more than a job can have");
  node.world_size = static_cast<int>(world_size);
  node.rank_offset = o.rank_offset >= 0 ? o.rank_offset : node.node_rank * node.nproc;
  ZT_CHECK(int64_t{node.rank_offset} + node.nproc <= node.world_size, UsageError, "ranks ", node.rank_offset, "..",
           node.rank_offset + node.nproc - 1, " do not fit in a world of ", node.world_size);
  return node;
}

// --- ssh --------------------------------------------------------------------------------

std::vector<std::string> ssh_prefix(const LaunchOptions& o, const std::string& host) {
  std::vector<std::string> argv{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"};
  if (o.ssh_port > 0) {
    argv.push_back("-p");
    argv.push_back(str(o.ssh_port));
  }
  argv.push_back(host);
  return argv;
}

std::string join_quoted(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& a : argv) text += (text.empty() ? "" : " ") + shell_quote(a);
  return text;
}

// Runs a command, returns its exit code and the last line it printed.
std::pair<int, std::string> run_capture(const std::vector<std::string>& argv) {
  FILE* pipe = ::popen((join_quoted(argv) + " 2>&1").c_str(), "r");
  ZT_CHECK(pipe != nullptr, IoError, "cannot run ", argv.front());
  std::string output, last;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  size_t end = output.find_last_not_of("\r\n");
  if (end != std::string::npos) {
    size_t start = output.rfind('\n', end);
    last = output.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 255, last};
}

void preflight(const LaunchOptions& o, const std::string& host, const std::string& exe) {
  auto argv = ssh_prefix(o, host);
  argv.insert(argv.end(), {"test", "-x", exe});
  const auto [code, message] = run_capture(argv);
  if (code == 0) return;
  if (code == 255) {
    throw CommError(str("pre-flight: cannot ssh to host '", host, "' (", message.empty() ? "ssh exited with 255" : message,
                        "). zerotrain launch starts remote ranks over passwordless ssh: check that `ssh ", host,
                        " true` works without a prompt (ssh-copy-id), or start each node yourself with --nnodes, "
                        "--node_rank and --master_addr"),
                    "launch");
  }
  throw CommError(str("pre-flight: host '", host, "' has no executable ", exe,
                      "; install zerotrain at the same path on every host"),
                  "launch");
}

void preflight_hosts(const LaunchOptions& o, const WorldInfo& world, const std::string& exe) {
  if (o.no_ssh_check) return;
  for (const auto& h : world) {
    if (!is_local_host(h.host)) preflight(o, h.host, exe);
  }
}

// Variables a remote node needs from here: ours, the comm libraries', threading, and the
// KEY=VALUE lines of DeepSpeed's .deepspeed_env (in . or ~, or DS_ENV_FILE).
Env exported_env() {
  Env env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = entry.substr(0, eq);
    for (const char* prefix : {"ZEROTRAIN_", "GLOO_", "NCCL_", "OMP_", "MKL_", "UCX_"}) {
      if (key.rfind(prefix, 0) == 0) env.emplace_back(key, entry.substr(eq + 1));
    }
  }
  const std::string name = env::get("DS_ENV_FILE").value_or(".deepspeed_env");
  for (const std::string& dir : {std::string("."), env::get("HOME").value_or("")}) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;   // the first that exists is used, as DeepSpeed does
    const files::TextFile file = files::read_text_file(path, {.what = "file of KEY=VALUE lines"});
    ZT_CHECK(file.text, IoError, "cannot read ", path.string(), " (the environment for the other nodes): ",
             file.problem);
    std::istringstream lines(*file.text);
    for (std::string line; std::getline(lines, line);) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos && line[0] != '#') env.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
    break;
  }
  return env;
}

void add_hostfile_children(SupervisorOptions& plan, const LaunchOptions& o, const WorldInfo& world, bool selected) {
  const std::string exe = self_exe();
  const std::string first = world.front().host;
  std::string master_addr = o.master_addr.empty() ? first : o.master_addr;
  ZT_CHECK(!(o.master_addr.empty() && is_local_host(first)), UsageError, "the first host of the hostfile is '", first,
           "', which the other hosts cannot reach as the master; give --master_addr with this host's address");
  const int master_port = o.master_port > 0 ? o.master_port : kDefaultMultiNodePort;
  const int world_size = total_slots(world);
  preflight_hosts(o, world, exe);
  const std::string cwd = std::filesystem::current_path().string();
  int offset = 0;
  for (size_t i = 0; i < world.size(); ++i) {
    const HostSlots& h = world[i];
    const int nproc = static_cast<int>(h.slots.size());
    if (is_local_host(h.host)) {
      NodeLayout node{static_cast<int>(world.size()), static_cast<int>(i), nproc, offset, world_size, master_addr,
                      master_port, selected ? h.slots : std::vector<int>{}};
      add_rank_children(plan, o, node);
    } else {
      std::vector<std::string> remote{exe, "launch", "--nnodes", str(world.size()), "--node_rank", str(i),
                                      "--nproc_per_node", str(nproc), "--rank_offset", str(offset), "--world_size",
                                      str(world_size), "--master_addr", master_addr, "--master_port", str(master_port),
                                      "--kill_grace_s", str(o.kill_grace_s), "--signal_grace_s",
                                      str(o.signal_grace_s)};
      if (!o.log_dir.empty()) remote.insert(remote.end(), {"--log_dir", std::filesystem::absolute(o.log_dir).string()});
      if (!o.backend.empty()) remote.insert(remote.end(), {"--backend", o.backend});
      if (o.timeout_s > 0) remote.insert(remote.end(), {"--timeout_s", str(o.timeout_s)});
      if (o.no_local_rank) remote.push_back("--no_local_rank");
      remote.push_back("--");
      remote.insert(remote.end(), o.command.begin(), o.command.end());
      std::string script = "cd " + shell_quote(cwd) + " && exec env";
      for (const auto& [key, value] : exported_env()) script += " " + shell_quote(key + "=" + value);
      if (!o.job_token.empty()) script += " " + shell_quote("ZEROTRAIN_JOB_TOKEN=" + o.job_token);
      // The remote launcher has no filter, so it passes the variable on as it is.
      if (selected) script += " " + shell_quote("CUDA_VISIBLE_DEVICES=" + join_slots(h.slots));
      script += " " + join_quoted(remote);
      auto argv = ssh_prefix(o, h.host);
      // A terminal on the remote side makes it get SIGHUP when this ssh is killed, so its
      // launcher stops its ranks.
      // -n: ssh must not read the launcher's terminal (a rank waiting for input would hang).
      argv.insert(argv.begin() + 1, {"-n", "-tt"});
      argv.push_back(script);
      plan.children.push_back({str("host ", h.host), str("ssh-", h.host, ".log"), argv, {}, /*prefix_output=*/false});
    }
    offset += nproc;
  }
}

// --- mpirun -----------------------------------------------------------------------------

void add_mpirun_child(SupervisorOptions& plan, const LaunchOptions& o, const WorldInfo* world, bool selected) {
  ZT_CHECK(o.nnodes <= 1 || world != nullptr, UsageError,
           "--backend mpi starts every node through mpirun: list the nodes in --hostfile instead of starting each "
           "with --nnodes/--node_rank");
  std::vector<std::string> argv{"mpirun"};
  int nproc = o.nproc_per_node < 0 ? 1 : o.nproc_per_node;
  int local_ranks = nproc;   // the ranks mpirun itself starts here (the others: one orted per host)
  if (world != nullptr) {
    preflight_hosts(o, *world, self_exe());   // mpirun's own ssh failure says much less
    nproc = total_slots(*world);
    local_ranks = 0;
    for (const auto& h : *world) local_ranks += is_local_host(h.host) ? static_cast<int>(h.slots.size()) : 1;
    const std::filesystem::path dir =
        o.log_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(o.log_dir);
    std::filesystem::create_directories(dir);
    const auto path = dir / str("zerotrain-hostfile-", ::getpid());
    std::ofstream(path) << to_hostfile(*world);
    argv.insert(argv.end(), {"--hostfile", path.string()});
    plan.temporary_files.push_back(path);
  }
  argv.insert(argv.end(), {"-np", str(nproc)});
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  // More ranks than cores is normal on small machines and in tests; binding would pile
  // them onto the same core.
  argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none"});
  const bool one_host = world == nullptr || std::all_of(world->begin(), world->end(), [](const HostSlots& h) {
                          return is_local_host(h.host);
                        });
  if (one_host) {
    const auto mca = single_host_mca_args();
    argv.insert(argv.end(), mca.begin(), mca.end());
  }
  Env env = comm_env(o);
  if (one_host) add_single_host_env(env);
  // A program that asks for gloo under mpirun finds its master here.
  if (world == nullptr) {
    env.emplace_back("MASTER_ADDR", o.master_addr.empty() ? "127.0.0.1" : o.master_addr);
    env.emplace_back("MASTER_PORT", str(o.master_port > 0 ? o.master_port : hold_a_port(plan)));
  } else {
    ZT_CHECK(!(o.master_addr.empty() && is_local_host(world->front().host) && world->size() > 1), UsageError,
             "the first host of the hostfile is '", world->front().host, "', which the other hosts cannot reach as "
             "the master; give --master_addr with this host's address");
    env.emplace_back("MASTER_ADDR", o.master_addr.empty() ? world->front().host : o.master_addr);
    env.emplace_back("MASTER_PORT", str(o.master_port > 0 ? o.master_port : kDefaultMultiNodePort));
  }
  for (const auto& [key, value] : env) argv.insert(argv.end(), {"-x", key});
  // The wrappers on this host tell from it that mpirun died before they could watch it
  // (they are then the launcher's children: it is their subreaper).
  env.emplace_back("ZEROTRAIN_LAUNCHER_PID", str(::getpid()));
  argv.insert(argv.end(), {mpi_rank_exe(), "--kill_grace_s", str(o.kill_grace_s)});
  if (o.no_local_rank) argv.push_back("--no_local_rank");
  if (selected && world != nullptr) {
    std::string per_host;
    for (const auto& h : *world) per_host += (per_host.empty() ? "" : ";") + join_slots(h.slots);
    argv.insert(argv.end(), {"--visible_devices", per_host});
  }
  if (!o.log_dir.empty()) argv.insert(argv.end(), {"--log_dir", std::filesystem::absolute(o.log_dir).string()});
  argv.push_back("--");
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  ChildSpec child{"mpirun", "mpirun.log", argv, env, /*prefix_output=*/false};
  child.ranks_inside = nproc;
  // mpirun holds about 4 descriptors per rank it starts (pipes for its output, measured
  // with OpenMPI 4.1); it hangs when it runs out.
  child.descriptors = 5 * int64_t{local_ranks} + 64;
  plan.children.push_back(std::move(child));
}

bool on_path(const std::string& program) {
  const std::string path = env::get("PATH").value_or("/usr/bin:/bin");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    if (::access((path.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool mpi_rank_exe_present() { return ::access(mpi_rank_exe().c_str(), X_OK) == 0; }

// --backend mpi, or no backend (auto) where mpirun can start a job that spans hosts (a
// hostfile): MPI crosses hosts faster than Gloo (docs/benchmarks.md). On one host the ranks
// talk over shared memory whatever the transport below, so auto starts them directly and
// leaves mpirun out, unless shared memory is off (ZEROTRAIN_SHM=0): then MPI's own is the
// faster. Per-node mode (--nnodes/--node_rank without a hostfile) has no mpirun: Gloo. So is
// an install without zerotrain-mpi-rank beside zerotrain.
bool uses_mpirun(const LaunchOptions& o) {
  const auto kind = o.backend.empty() ? comm::BackendKind::kAuto : comm::parse_backend(o.backend, "--backend");
  if (kind == comm::BackendKind::kMpi) return true;   // mpirun names zerotrain-mpi-rank if it is missing
  if (kind != comm::BackendKind::kAuto || !kMpiBuilt) return false;
  const bool per_node = o.hostfile.empty() && o.nnodes > 1;
  const bool one_host = o.hostfile.empty() && o.nnodes <= 1;
  if (one_host && env::get_bool("ZEROTRAIN_SHM").value_or(true)) return false;
  return !per_node && o.world_size < 0 && on_path("mpirun") && mpi_rank_exe_present();
}

}  // namespace

std::optional<size_t> python_script_argument(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  if (command[0].ends_with(".py")) return 1;
  const std::string name = std::filesystem::path(command[0]).filename().string();
  const bool python = name.starts_with("python") &&
                      std::all_of(name.begin() + 6, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
  if (!python) return std::nullopt;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& word = command[i];
    // -m MODULE, -c CODE, -- SCRIPT: the argument goes after the word that follows.
    if (word == "-m" || word == "-c" || word == "--") {
      return i + 1 < command.size() ? std::optional<size_t>(i + 2) : std::nullopt;
    }
    if (word.size() > 2 && (word.starts_with("-m") || word.starts_with("-c"))) return i + 1;   // -mMODULE
    if (word == "-W" || word == "-X" || word == "--check-hash-based-pycs") {
      ++i;   // an option with a value
      continue;
    }
    if (word.size() > 1 && word[0] == '-') continue;   // -u, -O, -B, ...
    return i + 1;   // the script ("-": standard input)
  }
  return std::nullopt;   // the interpreter alone
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

SupervisorOptions plan_launch(const LaunchOptions& options) {
  LaunchOptions o = options;
  ZT_CHECK(!o.command.empty(), UsageError,
           "no program to launch; put it after the options, e.g. zerotrain launch --nproc_per_node 2 -- ./train args");
  SupervisorOptions plan;
  plan.kill_grace = std::chrono::milliseconds(static_cast<int64_t>(o.kill_grace_s * 1000));
  plan.signal_grace = std::chrono::milliseconds(static_cast<int64_t>(o.signal_grace_s * 1000));
  // Under mpirun the ranks' wrappers and mpirun itself stop on --kill_grace_s, as before: the
  // longer grace for a save is the local launcher's (docs/launch.md).
  if (o.mpi_rank_wrapper || uses_mpirun(o)) plan.signal_grace = plan.kill_grace;
  if (!o.log_dir.empty()) plan.log_dir = o.log_dir;

  if (o.mpi_rank_wrapper) {
    // One rank under mpirun: supervise it like a local rank (prefix, log file, failure report).
    const int rank = static_cast<int>(env::get_int("OMPI_COMM_WORLD_RANK").value_or(0));
    // torchrun's names too, for programs that read them; comm's rendezvous sees that
    // they copy mpirun's and keeps mpirun's world.
    Env names;
    for (const auto& [name, ompi] : {std::pair{"RANK", "OMPI_COMM_WORLD_RANK"}, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"},
                                     {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
                                     {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                     {"LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}}) {
      if (auto value = env::get(ompi)) names.emplace_back(name, *value);
    }
    // Each wrapper runs on its rank's host, so it counts that host's CPUs; mpirun's own
    // notice would come once per rank, so there is none.
    const int on_host = static_cast<int>(env::get_int("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1));
    if (auto threads = omp_threads_per_rank(on_host)) names.emplace_back("OMP_NUM_THREADS", *threads);
    const int local_rank = static_cast<int>(env::get_int("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0));
    if (!o.visible_devices.empty()) {
      names.emplace_back("CUDA_VISIBLE_DEVICES", visible_devices_of_rank(o.visible_devices, rank, local_rank));
    }
    plan.children.push_back({str("rank ", rank), str("rank", rank, ".log"), rank_command(o, local_rank), names});
    plan.announce_signals = false;   // mpirun stopping the other ranks is not news
    plan.report_rank_to_launcher = rank;
    return plan;
  }
  o.job_token = job_token_of(o);
  const bool mpi = uses_mpirun(o);
  // --include/--exclude choose slots, and each rank sees its node's as CUDA_VISIBLE_DEVICES,
  // as under DeepSpeed's launcher. Without them the variable is left as the user set it.
  const bool selected = !o.include.empty() || !o.exclude.empty();
  if (!o.hostfile.empty() || selected) {
    ZT_CHECK(!o.hostfile.empty() || o.exclude.empty(), UsageError, "--exclude leaves out hosts or slots of a "
             "--hostfile; give one, or name this host's slots to use with --include, e.g. --include localhost:0,1");
    const WorldInfo hosts = o.hostfile.empty() ? include_on_this_host(o.include) : read_hostfile(o.hostfile);
    const WorldInfo world = select_resources(hosts, {o.include, o.exclude, o.nnodes, o.nproc_per_node});
    if (mpi) {
      add_mpirun_child(plan, o, &world, selected);
    } else if (world.size() == 1 && is_local_host(world.front().host)) {
      LaunchOptions local = o;
      local.nproc_per_node = total_slots(world);
      local.nnodes = 1;
      NodeLayout node = per_node_layout(local);
      if (selected) node.devices = world.front().slots;
      add_rank_children(plan, o, node);
    } else {
      add_hostfile_children(plan, o, world, selected);
    }
    return plan;
  }
  if (mpi) {
    add_mpirun_child(plan, o, nullptr, false);
  } else {
    add_rank_children(plan, o, per_node_layout(o));
  }
  return plan;
}

}  // namespace zerotrain::launch
