// DeepSpeed's hostfile format and --include/--exclude syntax (deepspeed/launcher/runner.py,
// tests/unit/launcher/test_run.py), with our messages.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tools/launch/hostfile.h"
#include "tools/launch/plan.h"
#include "tools/launch/port_reservation.h"
#include "tools/launch/rank_report.h"
#include "tools/launch/rank_threads.h"
#include "zerotrain/core/error.h"

namespace zl = zerotrain::launch;
using zerotrain::UsageError;

namespace {

zl::WorldInfo four_hosts() {
  return zl::parse_hostfile("worker-0 slots=4\nworker-1 slots=4\nworker-2 slots=4\nworker-3 slots=4\n", "hostfile");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(Hostfile, ParsesEntriesCommentsAndBlankLines) {
  auto w = zl::parse_hostfile("# a comment\n\nworker-0 slots=2\n  worker-1   slots=3  \n", "hf");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].host, "worker-0");
  EXPECT_EQ(w[0].slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(w[1].host, "worker-1");
  EXPECT_EQ(w[1].slots, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(zl::total_slots(w), 5);
  EXPECT_EQ(zl::to_hostfile(w), "worker-0 slots=2\nworker-1 slots=3\n");
}

TEST(Hostfile, RejectsBadEntryNamingTheLine) {
  auto msg = error_of([] { zl::parse_hostfile("worker-0 slots=2\nworker-1 slots:3\n", "my_hostfile"); });
  EXPECT_NE(msg.find("my_hostfile:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HOSTNAME slots=N"), std::string::npos) << msg;
}

TEST(Hostfile, RejectsDuplicateHostAndEmptyFile) {
  EXPECT_NE(error_of([] { zl::parse_hostfile("a slots=1\na slots=2\n", "hf"); }).find("appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::parse_hostfile("# only a comment\n", "hf"); }).find("no entries"), std::string::npos);
  EXPECT_NE(error_of([] { zl::read_hostfile("/nonexistent/hostfile"); }).find("cannot read"), std::string::npos);
}

TEST(Select, IncludeHostsAndSlots) {
  auto w = zl::select_resources(four_hosts(), {.include = "worker-1:0,2@worker-3"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].host, "worker-1");
  EXPECT_EQ(w[0].slots, (std::vector<int>{0, 2}));
  EXPECT_EQ(w[1].host, "worker-3");
  EXPECT_EQ(w[1].slots, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Select, IncludeKeepsHostfileOrder) {
  auto w = zl::select_resources(four_hosts(), {.include = "worker-2@worker-0:1"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].host, "worker-0");
  EXPECT_EQ(w[1].host, "worker-2");
}

TEST(Select, ExcludeHostsAndSlots) {
  auto w = zl::select_resources(four_hosts(), {.exclude = "worker-1@worker-2:0,3"});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].host, "worker-0");
  EXPECT_EQ(w[1].host, "worker-2");
  EXPECT_EQ(w[1].slots, (std::vector<int>{1, 2}));
  EXPECT_EQ(w[2].host, "worker-3");
}

TEST(Select, Errors) {
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.include = "worker-9"}); }).find("'worker-9' is not in"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.include = "worker-0:7"}); }).find("no slot 7"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.include = "worker-0:x"}); }).find("not a non-negative"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.include = "worker-0", .exclude = "worker-1"}); })
                .find("cannot be used together"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.include = "worker-0", .num_nodes = 1}); })
                .find("cannot be used with --include"),
            std::string::npos);
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.exclude = "worker-0@worker-1@worker-2@worker-3"}); })
                .find("leaves no host"),
            std::string::npos);
}

TEST(Select, NumNodesAndSlotsPerNode) {
  auto w = zl::select_resources(four_hosts(), {.num_nodes = 2, .slots_per_node = 1});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].host, "worker-1");
  EXPECT_EQ(w[1].slots, (std::vector<int>{0}));
  EXPECT_NE(error_of([] { zl::select_resources(four_hosts(), {.num_nodes = 5}); }).find("has 4 hosts"),
            std::string::npos);
}

TEST(Hostfile, LocalHostNames) {
  EXPECT_TRUE(zl::is_local_host("localhost"));
  EXPECT_TRUE(zl::is_local_host("127.0.0.1"));
  EXPECT_FALSE(zl::is_local_host("worker-0"));
}

TEST(Plan, LocalRanksGetTheRendezvousEnvironment) {
  zl::LaunchOptions o;
  o.nproc_per_node = 3;
  o.backend = "gloo";
  o.command = {"./train", "--x"};
  auto plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 3u);
  const auto& c = plan.children[2];
  EXPECT_EQ(c.label, "rank 2");
  EXPECT_EQ(c.argv, (std::vector<std::string>{"./train", "--x"}));
  auto get = [&](const std::string& key) {
    for (const auto& [k, v] : c.env) {
      if (k == key) return v;
    }
    return std::string("<unset>");
  };
  EXPECT_EQ(get("RANK"), "2");
  EXPECT_EQ(get("WORLD_SIZE"), "3");
  EXPECT_EQ(get("LOCAL_RANK"), "2");
  EXPECT_EQ(get("LOCAL_WORLD_SIZE"), "3");
  EXPECT_EQ(get("MASTER_ADDR"), "127.0.0.1");
  // A one-node job with no --master_port gets a free port picked by the launcher: it must be
  // set, be a whole decimal number, and be a real TCP port (0 would mean "any" to bind()).
  const std::string port = get("MASTER_PORT");
  ASSERT_NE(port, "<unset>");
  std::size_t parsed = 0;
  int port_number = 0;
  ASSERT_NO_THROW(port_number = std::stoi(port, &parsed)) << port;
  EXPECT_EQ(parsed, port.size()) << port;
  EXPECT_GE(port_number, 1) << port;
  EXPECT_LE(port_number, 65535) << port;
  // Held by the plan until the job ends, so that no other socket takes it before rank 0 listens.
  ASSERT_NE(plan.master_port, nullptr);
  EXPECT_EQ(port_number, plan.master_port->port());
}

TEST(Plan, SecondNodeOfAMultiNodeJob) {
  zl::LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  o.command = {"./train"};
  auto plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 2u);
  EXPECT_EQ(plan.children[0].label, "rank 2");
  EXPECT_EQ(plan.children[1].label, "rank 3");
  EXPECT_EQ(plan.master_port, nullptr);   // 29500 on every node: nothing to hold here
  o.node_rank = -1;
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("needs --node_rank"), std::string::npos);
  o.node_rank = 3;
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("not below --nnodes"), std::string::npos);
}

TEST(Plan, MpiRunsOneMpirunWithAWrapperPerRank) {
  zl::LaunchOptions o;
  o.nproc_per_node = 4;
  o.backend = "mpi";
  o.command = {"./train"};
  auto plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 1u);
  const auto& argv = plan.children[0].argv;
  EXPECT_EQ(argv.front(), "mpirun");
  EXPECT_NE(std::find_if(argv.begin(), argv.end(),
                         [](const std::string& a) { return a.ends_with("/zerotrain-mpi-rank"); }),
            argv.end());
  EXPECT_EQ(plan.children[0].ranks_inside, 4);
  EXPECT_EQ(argv.back(), "./train");
  auto np = std::find(argv.begin(), argv.end(), "-np");
  ASSERT_NE(np, argv.end());
  EXPECT_EQ(*(np + 1), "4");
  o.nnodes = 2;
  o.node_rank = 0;
  o.master_addr = "10.0.0.1";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("list the nodes in --hostfile"), std::string::npos);
}

// What follows "--mca NAME" in an mpirun command line, or "<unset>".
std::string mca_of(const std::vector<std::string>& argv, const std::string& name) {
  for (size_t i = 0; i + 2 < argv.size(); ++i) {
    if (argv[i] == "--mca" && argv[i + 1] == name) return argv[i + 2];
  }
  return "<unset>";
}

std::string env_of(const zl::ChildSpec& child, const std::string& key) {
  for (const auto& [k, v] : child.env) {
    if (k == key) return v;
  }
  return "<unset>";
}

// On one host MPI's traffic stays inside it: no TCP transport (OpenMPI's listens on every
// interface whatever its if_include says), loopback for what the user brings back; a job
// across hosts keeps OpenMPI's defaults, and so does a setting the user made.
TEST(Plan, MpiOnOneHostKeepsItsTrafficOnLoopback) {
  ::unsetenv("OMPI_MCA_btl");
  ::unsetenv("OMPI_MCA_oob_tcp_if_exclude");
  zl::LaunchOptions o;
  o.nproc_per_node = 2;
  o.backend = "mpi";
  o.command = {"./train"};
  auto argv = zl::plan_launch(o).children.at(0).argv;
  EXPECT_EQ(mca_of(argv, "pml"), "ob1");
  EXPECT_EQ(mca_of(argv, "btl"), "self,vader");
  EXPECT_EQ(mca_of(argv, "btl_tcp_if_include"), "lo");
  EXPECT_EQ(mca_of(argv, "oob_tcp_if_include"), "lo");

  ::setenv("OMPI_MCA_btl", "self,tcp", 1);
  ::setenv("OMPI_MCA_oob_tcp_if_exclude", "eth1", 1);
  argv = zl::plan_launch(o).children.at(0).argv;
  ::unsetenv("OMPI_MCA_btl");
  ::unsetenv("OMPI_MCA_oob_tcp_if_exclude");
  EXPECT_EQ(mca_of(argv, "btl"), "<unset>");
  EXPECT_EQ(mca_of(argv, "oob_tcp_if_include"), "<unset>");   // exclusive with the user's exclude
  EXPECT_EQ(mca_of(argv, "btl_tcp_if_include"), "lo");

  const auto hostfile = std::filesystem::temp_directory_path() / ("zt-hostfile-test-" + std::to_string(::getpid()));
  { std::ofstream(hostfile) << "worker-0 slots=2\nworker-1 slots=2\n"; }
  o.hostfile = hostfile.string();
  o.no_ssh_check = true;
  o.master_addr = "10.0.0.1";
  const auto plan = zl::plan_launch(o);
  std::filesystem::remove(hostfile);
  for (const auto& path : plan.temporary_files) std::filesystem::remove(path);
  argv = plan.children.at(0).argv;
  for (const char* name : {"pml", "btl", "btl_tcp_if_include", "oob_tcp_if_include"}) {
    EXPECT_EQ(mca_of(argv, name), "<unset>") << name;
  }
}

// Every rank of one launch gets the same random ZEROTRAIN_JOB_TOKEN
// (zerotrain/comm/rendezvous/job_token.h); another launch another one; one node of a job
// started node by node none, unless the user gives one (then that one).
TEST(Plan, TheRanksOfOneLaunchShareAJobToken) {
  ::unsetenv("ZEROTRAIN_JOB_TOKEN");
  zl::LaunchOptions o;
  o.nproc_per_node = 3;
  o.backend = "gloo";
  o.command = {"./train"};
  const auto first = zl::plan_launch(o);
  const std::string token = env_of(first.children.at(0), "ZEROTRAIN_JOB_TOKEN");
  ASSERT_EQ(token.size(), 32u) << token;
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  for (const auto& child : first.children) EXPECT_EQ(env_of(child, "ZEROTRAIN_JOB_TOKEN"), token);
  if (!std::getenv("NCCL_SOCKET_IFNAME")) {   // and NCCL's sockets on loopback: the job is on this host
    EXPECT_EQ(env_of(first.children.at(0), "NCCL_SOCKET_IFNAME"), "lo");
  }
  EXPECT_NE(env_of(zl::plan_launch(o).children.at(0), "ZEROTRAIN_JOB_TOKEN"), token);

  o.backend = "mpi";
  const auto mpirun = zl::plan_launch(o).children.at(0);
  EXPECT_EQ(env_of(mpirun, "ZEROTRAIN_JOB_TOKEN").size(), 32u);
  const auto x = std::find(mpirun.argv.begin(), mpirun.argv.end(), "ZEROTRAIN_JOB_TOKEN");
  ASSERT_NE(x, mpirun.argv.begin());
  ASSERT_NE(x, mpirun.argv.end());
  EXPECT_EQ(*(x - 1), "-x");

  o.backend = "gloo";
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  const auto one_node_of_two = zl::plan_launch(o);
  EXPECT_EQ(env_of(one_node_of_two.children.at(0), "ZEROTRAIN_JOB_TOKEN"), "<unset>");
  EXPECT_EQ(env_of(one_node_of_two.children.at(0), "NCCL_SOCKET_IFNAME"), "<unset>");
  ::setenv("ZEROTRAIN_JOB_TOKEN", "given-on-every-node", 1);
  const auto given = zl::plan_launch(o);
  ::unsetenv("ZEROTRAIN_JOB_TOKEN");
  EXPECT_EQ(env_of(given.children.at(0), "ZEROTRAIN_JOB_TOKEN"), "given-on-every-node");
}

TEST(Plan, PerNodeModeNeverUsesMpirun) {
  zl::LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 2;
  o.node_rank = 0;
  o.master_addr = "10.0.0.1";
  o.command = {"./train"};
  auto plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 2u);
  EXPECT_EQ(plan.children[0].argv.front(), "./train");
}

// OMP_NUM_THREADS as the test sets it, restored after.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("OMP_NUM_THREADS")) saved_ = old;
    if (value) {
      ::setenv("OMP_NUM_THREADS", value->c_str(), 1);
    } else {
      ::unsetenv("OMP_NUM_THREADS");
    }
  }
  ~ScopedOmpThreads() {
    if (saved_) {
      ::setenv("OMP_NUM_THREADS", saved_->c_str(), 1);
    } else {
      ::unsetenv("OMP_NUM_THREADS");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(Plan, EachRankOfAHostGetsItsShareOfTheCpusUnlessTheUserChose) {
  const int cpus = zl::usable_cpus();
  ASSERT_GE(cpus, 1);
  for (int nproc : {2, 3, cpus, 4 * cpus}) {
    ScopedOmpThreads unset(std::nullopt);
    zl::LaunchOptions o;
    o.nproc_per_node = nproc;
    o.backend = "gloo";
    o.command = {"./train"};
    const auto plan = zl::plan_launch(o);
    ASSERT_EQ(plan.children.size(), static_cast<size_t>(nproc));
    const std::string share = std::to_string(std::max(1, cpus / nproc));
    for (const auto& child : plan.children) EXPECT_EQ(env_of(child, "OMP_NUM_THREADS"), share) << nproc << " ranks";
    ASSERT_EQ(plan.notices.size(), 1u) << nproc << " ranks";
    EXPECT_NE(plan.notices[0].find("OMP_NUM_THREADS=" + share + " for each of the " + std::to_string(nproc)),
              std::string::npos)
        << plan.notices[0];
  }
  {
    ScopedOmpThreads theirs(std::string("5"));
    zl::LaunchOptions o;
    o.nproc_per_node = 2;
    o.command = {"./train"};
    const auto plan = zl::plan_launch(o);
    for (const auto& child : plan.children) EXPECT_EQ(env_of(child, "OMP_NUM_THREADS"), "<unset>");   // inherited
    EXPECT_TRUE(plan.notices.empty());
  }
  {
    ScopedOmpThreads unset(std::nullopt);
    zl::LaunchOptions o;
    o.nproc_per_node = 1;
    o.command = {"./train"};
    const auto plan = zl::plan_launch(o);
    EXPECT_EQ(env_of(plan.children.at(0), "OMP_NUM_THREADS"), "<unset>");   // LibTorch's own choice
    EXPECT_TRUE(plan.notices.empty());
  }
}

// The per-rank share counts the CPUs this process may run on, not the machine's: with the
// affinity narrowed to one CPU, the count is 1 (the Plan tests above derive their expectation
// from usable_cpus(), so this is the check that it follows the mask).
TEST(Plan, UsableCpusFollowTheAffinityMask) {
  cpu_set_t before;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(before), &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one CPU in this process's affinity: nothing to narrow";
  const int all = zl::usable_cpus();
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  const int narrowed = zl::usable_cpus();
  ScopedOmpThreads unset(std::nullopt);
  const auto share = zl::omp_threads_per_rank(2);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(narrowed, 1);
  EXPECT_LE(all, CPU_COUNT(&before));
  EXPECT_EQ(share, std::optional<std::string>("1"));
}

TEST(Plan, UnderMpirunEachRanksWrapperCountsItsHostsRanks) {
  ScopedOmpThreads unset(std::nullopt);
  ASSERT_EQ(::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1), 0);
  zl::LaunchOptions o;
  o.mpi_rank_wrapper = true;
  o.command = {"./train"};
  const auto plan = zl::plan_launch(o);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(env_of(plan.children.at(0), "OMP_NUM_THREADS"), std::to_string(std::max(1, zl::usable_cpus() / 2)));
  EXPECT_TRUE(plan.notices.empty());   // one per rank would repeat it N times
}

TEST(Plan, NoProgramIsAnError) {
  zl::LaunchOptions o;
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("no program to launch"), std::string::npos);
}

// DeepSpeed's launcher: every rank of a node sees that node's slots chosen with --include or
// --exclude as CUDA_VISIBLE_DEVICES; without a filter the variable is left as the user set it.
TEST(Plan, IncludeAndExcludeSetEachNodesVisibleDevices) {
  zl::LaunchOptions o;
  o.backend = "gloo";
  o.command = {"./train"};
  auto plan = zl::plan_launch(o);
  EXPECT_EQ(env_of(plan.children.at(0), "CUDA_VISIBLE_DEVICES"), "<unset>");

  o.include = "localhost:1,3";   // no hostfile: this host's slots
  plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 2u);
  for (int local = 0; local < 2; ++local) {
    EXPECT_EQ(env_of(plan.children[local], "CUDA_VISIBLE_DEVICES"), "1,3");
    EXPECT_EQ(env_of(plan.children[local], "LOCAL_RANK"), std::to_string(local));
  }

  const auto hostfile = std::filesystem::temp_directory_path() / ("zt-devices-test-" + std::to_string(::getpid()));
  { std::ofstream(hostfile) << "localhost slots=4\n"; }
  o.hostfile = hostfile.string();
  o.include.clear();
  plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 4u);
  EXPECT_EQ(env_of(plan.children.at(0), "CUDA_VISIBLE_DEVICES"), "<unset>");
  o.exclude = "localhost:0";
  plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 3u);
  EXPECT_EQ(env_of(plan.children.at(2), "CUDA_VISIBLE_DEVICES"), "1,2,3");

  // Over ssh each remote launcher gets its host's slots; under mpirun each rank's wrapper.
  { std::ofstream(hostfile) << "worker-0 slots=4\nworker-1 slots=4\n"; }
  o.exclude.clear();
  o.include = "worker-0:1@worker-1:0,2";
  o.no_ssh_check = true;
  o.master_addr = "10.0.0.1";
  plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 2u);
  EXPECT_NE(plan.children[0].argv.back().find("'CUDA_VISIBLE_DEVICES=1'"), std::string::npos)
      << plan.children[0].argv.back();
  EXPECT_NE(plan.children[1].argv.back().find("'CUDA_VISIBLE_DEVICES=0,2'"), std::string::npos)
      << plan.children[1].argv.back();
  o.backend = "mpi";
  plan = zl::plan_launch(o);
  std::filesystem::remove(hostfile);
  for (const auto& path : plan.temporary_files) std::filesystem::remove(path);
  const auto& argv = plan.children.at(0).argv;
  const auto flag = std::find(argv.begin(), argv.end(), "--visible_devices");
  ASSERT_NE(flag, argv.end());
  EXPECT_EQ(*(flag + 1), "1;0,2");

  zl::LaunchOptions wrapper;
  wrapper.mpi_rank_wrapper = true;
  wrapper.visible_devices = "1;0,2";
  wrapper.command = {"./train"};
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  const auto rank2 = zl::plan_launch(wrapper);
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  const auto rank0 = zl::plan_launch(wrapper);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);   // mpirun placed it elsewhere than the hostfile's order
  const std::string misplaced = error_of([&] { zl::plan_launch(wrapper); });
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(env_of(rank2.children.at(0), "CUDA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(env_of(rank0.children.at(0), "CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_NE(misplaced.find("hostfile's order"), std::string::npos) << misplaced;
}

TEST(Plan, IncludeWithoutAHostfileNamesThisHostsSlots) {
  zl::LaunchOptions o;
  o.backend = "gloo";
  o.command = {"./train"};
  o.include = "worker-0:1";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("is not this host"), std::string::npos);
  o.include = "localhost";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("name the slots"), std::string::npos);
  o.include = "localhost:0@127.0.0.1:1";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("give --hostfile"), std::string::npos);
  o.include.clear();
  o.exclude = "localhost:0";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("give one"), std::string::npos);
}

// DeepSpeed's launcher gives a Python script --local_rank=N before its own arguments;
// zerotrain's programs and other executables get their arguments as they are.
TEST(Plan, PythonScriptsGetLocalRankUnlessTurnedOff) {
  using Argv = std::vector<std::string>;
  EXPECT_EQ(zl::python_script_argument({"train.py", "--x"}), 1u);
  EXPECT_EQ(zl::python_script_argument({"/usr/bin/python3.11", "-u", "-W", "ignore", "t.py", "a"}), 5u);
  EXPECT_EQ(zl::python_script_argument({"python", "-m", "pkg.train", "a"}), 3u);
  EXPECT_EQ(zl::python_script_argument({"python3", "-c", "import sys"}), 3u);
  EXPECT_EQ(zl::python_script_argument({"python3", "-mpkg"}), 2u);
  EXPECT_EQ(zl::python_script_argument({"python3"}), std::nullopt);
  EXPECT_EQ(zl::python_script_argument({"python3", "-m"}), std::nullopt);
  EXPECT_EQ(zl::python_script_argument({"./zerotrain", "train", "--deepspeed", "c.json"}), std::nullopt);
  EXPECT_EQ(zl::python_script_argument({"sh", "-c", "python x.py"}), std::nullopt);
  EXPECT_EQ(zl::python_script_argument({"./pythonic"}), std::nullopt);

  zl::LaunchOptions o;
  o.nproc_per_node = 2;
  o.backend = "gloo";
  o.command = {"python3", "-u", "train.py", "--x"};
  auto plan = zl::plan_launch(o);
  EXPECT_EQ(plan.children.at(1).argv, (Argv{"python3", "-u", "train.py", "--local_rank=1", "--x"}));
  o.no_local_rank = true;
  plan = zl::plan_launch(o);
  EXPECT_EQ(plan.children.at(1).argv, (Argv{"python3", "-u", "train.py", "--x"}));
  o.no_local_rank = false;
  o.command = {"./zerotrain", "train", "--x"};
  plan = zl::plan_launch(o);
  EXPECT_EQ(plan.children.at(1).argv, o.command);

  // Under mpirun each rank's wrapper adds it, from its local rank; --no_local_rank reaches it.
  o.command = {"train.py"};
  o.backend = "mpi";
  o.no_local_rank = true;
  const auto mpirun = zl::plan_launch(o).children.at(0).argv;
  EXPECT_NE(std::find(mpirun.begin(), mpirun.end(), "--no_local_rank"), mpirun.end());
  zl::LaunchOptions wrapper;
  wrapper.mpi_rank_wrapper = true;
  wrapper.command = {"train.py", "--x"};
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  const auto with = zl::plan_launch(wrapper);
  wrapper.no_local_rank = true;
  const auto without = zl::plan_launch(wrapper);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(with.children.at(0).argv, (Argv{"train.py", "--local_rank=3", "--x"}));
  EXPECT_EQ(without.children.at(0).argv, (Argv{"train.py", "--x"}));
}

// --backend takes every backend the ranks know, nccl too (it needs a GPU per rank, and says
// so in the rank that has none); threads is refused: it joins threads of one process.
TEST(Plan, BackendNcclReachesTheRanks) {
  zl::LaunchOptions o;
  o.nproc_per_node = 2;
  o.backend = "nccl";
  o.command = {"./train"};
  const auto plan = zl::plan_launch(o);
  ASSERT_EQ(plan.children.size(), 2u);   // started here, not through mpirun
  EXPECT_EQ(env_of(plan.children[1], "ZEROTRAIN_COMM_BACKEND"), "nccl");
  o.backend = "threads";
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("threads backend"), std::string::npos);
}

// DeepSpeed's .deepspeed_env, read for the remote nodes of a hostfile job: a FIFO of that
// name is refused at once, named, instead of a read that waits for a writer forever.
TEST(Plan, AFifoDeepspeedEnvIsRefusedNotWaitedOn) {
  const auto dir = std::filesystem::temp_directory_path() / ("zt-ds-env-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  ASSERT_EQ(::mkfifo(".deepspeed_env", 0600), 0);
  { std::ofstream("hostfile") << "worker-0 slots=1\nworker-1 slots=1\n"; }
  zl::LaunchOptions o;
  o.hostfile = "hostfile";
  o.backend = "gloo";
  o.no_ssh_check = true;
  o.master_addr = "10.0.0.1";
  o.command = {"./train"};
  std::string message = "<no IoError>";
  try {
    zl::plan_launch(o);
  } catch (const zerotrain::IoError& e) {
    message = e.what();
  }
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(dir);
  EXPECT_NE(message.find(".deepspeed_env"), std::string::npos) << message;
  EXPECT_NE(message.find("FIFO"), std::string::npos) << message;
}

TEST(Plan, ShellQuote) {
  EXPECT_EQ(zl::shell_quote("a b"), "'a b'");
  EXPECT_EQ(zl::shell_quote("it's"), "'it'\\''s'");
}

// The records by which the wrappers under mpirun tell the launcher how their rank ended.
TEST(RankReport, RecordsRoundTripAndNothingElseIsOne) {
  const zl::RankEnd end{12, 3 << 8, true, 1732329600123456789};
  const std::string line = zl::format_rank_end(end);
  ASSERT_EQ(line.back(), '\n');
  const auto parsed = zl::parse_rank_end(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->rank, 12);
  EXPECT_EQ(parsed->status, 3 << 8);
  EXPECT_TRUE(parsed->failed);
  EXPECT_EQ(parsed->time_ns, 1732329600123456789);
  for (const char* other : {"zerotrain-rank-ended rank=1 status=0 failed=0 time_ns=5", "[rank 1] hello", "",
                            "\x1ezerotrain-rank-ended rank=1 status=0 failed=0", "\x1ezerotrain-rank-ended rank=-1 "
                            "status=0 failed=0 time_ns=5"}) {
    EXPECT_FALSE(zl::parse_rank_end(other).has_value()) << other;
  }
  std::string_view rest;
  EXPECT_EQ(zl::parse_rank_prefix("[rank 7] loss 0.5", &rest), 7);
  EXPECT_EQ(rest, "loss 0.5");
  EXPECT_FALSE(zl::parse_rank_prefix("[rank x] a", &rest).has_value());
  EXPECT_FALSE(zl::parse_rank_prefix("[rank 7]a", &rest).has_value());
}

}  // namespace
