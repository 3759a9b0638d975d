// DeepSpeed's hostfile format and --include/--exclude syntax (deepspeed/launcher/runner.py,
// tests/unit/launcher/test_run.py), with our messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tools/launch/hostfile.h"
#include "tools/launch/plan.h"
#include "tools/launch/rank_report.h"
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

TEST(Plan, NoProgramIsAnError) {
  zl::LaunchOptions o;
  EXPECT_NE(error_of([&] { zl::plan_launch(o); }).find("no program to launch"), std::string::npos);
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
