// The launcher environment (rendezvous_from_env), the ZEROTRAIN_COMM_* overrides (apply_env),
// backend names and the shard layout (chunk_range). No LibTorch here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/config/config.h"
#include "zerotrain/comm/types.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm {
namespace {

using namespace std::chrono_literals;

using test::EnvGuard;
using test::contains;

// One ctest entry costs ~0.4 s of LibTorch loading (this binary links it), so each test
// below checks one topic through several cases, each under a fresh EnvGuard.

// ---------------------------------------------------------------- rendezvous_from_env

TEST(CommEnv, NoLauncherIsAWorldOfOne) {
  {
    EnvGuard env;
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kNone);
    EXPECT_STREQ(to_string(info.source), "none");
    EXPECT_EQ(info.rank, 0);
    EXPECT_EQ(info.world_size, 1);
    EXPECT_EQ(info.local_rank, 0);
    EXPECT_EQ(info.local_world_size, 1);
    EXPECT_EQ(info.master_addr, "");
    EXPECT_EQ(info.master_port, 0);
  }
  {
    SCOPED_TRACE("MASTER_ADDR, MASTER_PORT and LOCAL_RANK alone");
    EnvGuard env;
    env.set("MASTER_ADDR", "10.0.0.1");
    env.set("MASTER_PORT", "29501");
    env.set("LOCAL_RANK", "1");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kNone);
    EXPECT_EQ(info.rank, 0);
    EXPECT_EQ(info.world_size, 1);
  }
  {
    SCOPED_TRACE("SLURM_PROCID without SLURM_NTASKS (a plain salloc shell)");
    EnvGuard env;
    env.set("SLURM_PROCID", "0");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kNone);
    EXPECT_EQ(info.world_size, 1);
  }
  {
    SCOPED_TRACE("the guard clears, then restores what was there");
    EnvGuard outer;
    outer.set("RANK", "3");
    {
      EnvGuard inner;
      EXPECT_EQ(std::getenv("RANK"), nullptr);
      inner.set("RANK", "7");
      inner.set("WORLD_SIZE", "8");
      EXPECT_EQ(rendezvous_from_env().rank, 7);
    }
    ASSERT_NE(std::getenv("RANK"), nullptr);
    EXPECT_STREQ(std::getenv("RANK"), "3");
    EXPECT_EQ(std::getenv("WORLD_SIZE"), nullptr);
  }
}

TEST(CommEnv, Torchrun) {
  {
    EnvGuard env;
    env.set("RANK", "5");
    env.set("WORLD_SIZE", "8");
    env.set("LOCAL_RANK", "1");
    env.set("LOCAL_WORLD_SIZE", "4");
    env.set("MASTER_ADDR", "10.1.2.3");
    env.set("MASTER_PORT", "29501");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kTorchrun);
    EXPECT_STREQ(to_string(info.source), "torchrun");
    EXPECT_EQ(info.rank, 5);
    EXPECT_EQ(info.world_size, 8);
    EXPECT_EQ(info.local_rank, 1);
    EXPECT_EQ(info.local_world_size, 4);
    EXPECT_EQ(info.master_addr, "10.1.2.3");
    EXPECT_EQ(info.master_port, 29501);
  }
  {
    SCOPED_TRACE("no LOCAL_* variables: one node");
    EnvGuard env;
    env.set("RANK", "2");
    env.set("WORLD_SIZE", "4");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kTorchrun);
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.world_size, 4);
    EXPECT_EQ(info.local_rank, 2);
    EXPECT_EQ(info.local_world_size, 4);
    EXPECT_EQ(info.master_addr, "");
    EXPECT_EQ(info.master_port, 0);
  }
  {
    SCOPED_TRACE("DeepSpeed's launcher sets LOCAL_SIZE");
    EnvGuard env;
    env.set("RANK", "3");
    env.set("WORLD_SIZE", "4");
    env.set("LOCAL_RANK", "1");
    env.set("LOCAL_SIZE", "2");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kTorchrun);
    EXPECT_EQ(info.local_rank, 1);
    EXPECT_EQ(info.local_world_size, 2);
  }
  {
    SCOPED_TRACE("LOCAL_WORLD_SIZE wins over LOCAL_SIZE");
    EnvGuard env;
    env.set("RANK", "0");
    env.set("WORLD_SIZE", "8");
    env.set("LOCAL_RANK", "0");
    env.set("LOCAL_WORLD_SIZE", "4");
    env.set("LOCAL_SIZE", "2");
    EXPECT_EQ(rendezvous_from_env().local_world_size, 4);
  }
}

TEST(CommEnv, OpenMpi) {
  {
    EnvGuard env;
    env.set("OMPI_COMM_WORLD_RANK", "3");
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kOpenMpi);
    EXPECT_STREQ(to_string(info.source), "openmpi");
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.world_size, 4);
    EXPECT_EQ(info.local_rank, 1);
    EXPECT_EQ(info.local_world_size, 2);
    EXPECT_EQ(info.master_addr, "");   // mpirun says nothing about a store
    EXPECT_EQ(info.master_port, 0);
  }
  {
    SCOPED_TRACE("with MASTER_ADDR/MASTER_PORT, no local variables");
    EnvGuard env;
    env.set("OMPI_COMM_WORLD_RANK", "0");
    env.set("OMPI_COMM_WORLD_SIZE", "2");
    env.set("MASTER_ADDR", "head");
    env.set("MASTER_PORT", "1234");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kOpenMpi);
    EXPECT_EQ(info.local_rank, 0);
    EXPECT_EQ(info.local_world_size, 1);
    EXPECT_EQ(info.master_addr, "head");
    EXPECT_EQ(info.master_port, 1234);
  }
}

TEST(CommEnv, Slurm) {
  {
    EnvGuard env;
    env.set("SLURM_PROCID", "5");
    env.set("SLURM_NTASKS", "8");
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_NTASKS_PER_NODE", "2");
    env.set("SLURM_STEP_NODELIST", "node[01-04],gpu2");
    env.set("SLURM_JOB_NODELIST", "other[1-9]");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kSlurm);
    EXPECT_STREQ(to_string(info.source), "slurm");
    EXPECT_EQ(info.rank, 5);
    EXPECT_EQ(info.world_size, 8);
    EXPECT_EQ(info.local_rank, 1);
    EXPECT_EQ(info.local_world_size, 2);
    EXPECT_EQ(info.master_addr, "node01");
    EXPECT_EQ(info.master_port, 29500);
  }
  {
    SCOPED_TRACE("node list forms");
    EnvGuard env;
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NTASKS", "2");
    const std::pair<const char*, const char*> cases[] = {
        {"node[01-04],gpu2", "node01"}, {"node[07,01-04]", "node07"}, {"gpu2,node[01-04]", "gpu2"},
        {"single", "single"},           {"rack1-node[3]", "rack1-node3"},
    };
    for (const auto& [list, first] : cases) {
      env.set("SLURM_STEP_NODELIST", list);
      EXPECT_EQ(rendezvous_from_env().master_addr, first) << list;
    }
  }
  {
    SCOPED_TRACE("SLURM_JOB_NODELIST when there is no step list; no SLURM_NTASKS_PER_NODE");
    EnvGuard env;
    env.set("SLURM_PROCID", "1");
    env.set("SLURM_NTASKS", "3");
    env.set("SLURM_JOB_NODELIST", "cn[10-12]");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kSlurm);
    EXPECT_EQ(info.master_addr, "cn10");
    EXPECT_EQ(info.master_port, 29500);
    EXPECT_EQ(info.local_rank, 0);
    EXPECT_EQ(info.local_world_size, 3);   // assumed one node
  }
  {
    SCOPED_TRACE("MASTER_ADDR/MASTER_PORT win over the node list");
    EnvGuard env;
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NTASKS", "2");
    env.set("SLURM_STEP_NODELIST", "node[01-04]");
    env.set("MASTER_ADDR", "10.9.9.9");
    env.set("MASTER_PORT", "40000");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.master_addr, "10.9.9.9");
    EXPECT_EQ(info.master_port, 40000);
  }
}

TEST(CommEnv, TorchrunWinsOverMpiWhichWinsOverSlurm) {
  {
    EnvGuard env;
    env.set("RANK", "1");
    env.set("WORLD_SIZE", "2");
    env.set("OMPI_COMM_WORLD_RANK", "0");
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    env.set("SLURM_PROCID", "3");
    env.set("SLURM_NTASKS", "4");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kTorchrun);
    EXPECT_EQ(info.rank, 1);
    EXPECT_EQ(info.world_size, 2);
  }
  {
    EnvGuard env;
    env.set("OMPI_COMM_WORLD_RANK", "2");
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_NTASKS", "1");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kOpenMpi);
    EXPECT_EQ(info.rank, 2);
  }
  {
    // `zerotrain launch` under mpirun copies the OpenMPI values into RANK/WORLD_SIZE:
    // the process still belongs to mpirun's world.
    EnvGuard env;
    env.set("RANK", "2");
    env.set("WORLD_SIZE", "4");
    env.set("OMPI_COMM_WORLD_RANK", "2");
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    env.set("MASTER_ADDR", "10.0.0.1");
    env.set("MASTER_PORT", "1234");
    RendezvousInfo info = rendezvous_from_env();
    EXPECT_EQ(info.source, LaunchSource::kOpenMpi);
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.master_addr, "10.0.0.1");
    EXPECT_EQ(info.master_port, 1234);
  }
}

// Sets the variables (name, value pairs), calls rendezvous_from_env() and returns the
// message of the ConfigError it must throw.
std::string rendezvous_error(const std::vector<std::pair<const char*, const char*>>& variables) {
  EnvGuard env;
  std::string what;
  for (const auto& [name, value] : variables) {
    env.set(name, value);
    what += std::string(name) + "=" + value + " ";
  }
  return test::error_of<ConfigError>([] { rendezvous_from_env(); }, what);
}

TEST(CommEnv, BadLauncherVariablesNameTheVariable) {
  std::string message = rendezvous_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  EXPECT_TRUE(contains(message, "RANK=4")) << message;
  EXPECT_TRUE(contains(message, "WORLD_SIZE=4")) << message;

  message = rendezvous_error({{"RANK", "-1"}, {"WORLD_SIZE", "4"}});
  EXPECT_TRUE(contains(message, "RANK=-1")) << message;

  message = rendezvous_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}});
  EXPECT_TRUE(contains(message, "WORLD_SIZE=0")) << message;

  message = rendezvous_error({{"RANK", "0"}});
  EXPECT_TRUE(contains(message, "WORLD_SIZE is not set")) << message;

  message = rendezvous_error({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
  EXPECT_TRUE(contains(message, "RANK=\"one\"")) << message;
  EXPECT_TRUE(contains(message, "not an integer")) << message;

  message = rendezvous_error({{"RANK", "1"}, {"WORLD_SIZE", "2x"}});
  EXPECT_TRUE(contains(message, "WORLD_SIZE=\"2x\"")) << message;
  EXPECT_TRUE(contains(message, "not an integer")) << message;

  message = rendezvous_error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_TRUE(contains(message, "local rank 2")) << message;

  message = rendezvous_error({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_TRUE(contains(message, "OMPI_COMM_WORLD_RANK=2")) << message;
  EXPECT_TRUE(contains(message, "OMPI_COMM_WORLD_SIZE=2")) << message;

  message = rendezvous_error({{"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_TRUE(contains(message, "OMPI_COMM_WORLD_SIZE is not set")) << message;

  message = rendezvous_error({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}});
  EXPECT_TRUE(contains(message, "SLURM_PROCID=3")) << message;
  EXPECT_TRUE(contains(message, "SLURM_NTASKS=2")) << message;
}

// ---------------------------------------------------------------- apply_env, names

TEST(CommEnv, ApplyEnv) {
  {
    SCOPED_TRACE("no variables: the options as given");
    EnvGuard env;
    CommOptions options;
    options.backend = BackendKind::kGloo;
    options.timeout = 1234ms;
    options.check_fingerprints = true;
    options.bucket_nbytes = 99;
    CommOptions out = apply_env(options);
    EXPECT_EQ(out.backend, BackendKind::kGloo);
    EXPECT_EQ(out.timeout, 1234ms);
    EXPECT_TRUE(out.check_fingerprints);
    EXPECT_EQ(out.bucket_nbytes, 99);

    CommOptions defaults = apply_env({});
    EXPECT_EQ(defaults.backend, BackendKind::kAuto);
    EXPECT_EQ(defaults.timeout, kDefaultTimeout);
    EXPECT_FALSE(defaults.check_fingerprints);
  }
  {
    SCOPED_TRACE("backend, timeout and debug override the options");
    EnvGuard env;
    env.set("ZEROTRAIN_COMM_BACKEND", "Threads");
    env.set("ZEROTRAIN_COMM_TIMEOUT_S", "7");
    env.set("ZEROTRAIN_COMM_DEBUG", "1");
    CommOptions options;
    options.backend = BackendKind::kGloo;
    options.bucket_nbytes = 64;
    CommOptions out = apply_env(options);
    EXPECT_EQ(out.backend, BackendKind::kThreads);
    EXPECT_EQ(out.timeout, std::chrono::milliseconds(7000));
    EXPECT_TRUE(out.check_fingerprints);
    EXPECT_EQ(out.bucket_nbytes, 64);   // not an environment setting
  }
  {
    SCOPED_TRACE("ZEROTRAIN_COMM_DEBUG=off turns fingerprints off");
    EnvGuard env;
    env.set("ZEROTRAIN_COMM_DEBUG", "off");
    CommOptions options;
    options.check_fingerprints = true;
    EXPECT_FALSE(apply_env(options).check_fingerprints);
  }
}

TEST(CommEnv, ApplyEnvRejectsBadValues) {
  {
    EnvGuard env;
    env.set("ZEROTRAIN_COMM_BACKEND", "ncl");
    const std::string message = test::error_of<ConfigError>([] { apply_env({}); });
    EXPECT_TRUE(contains(message, "ZEROTRAIN_COMM_BACKEND")) << message;
    EXPECT_TRUE(contains(message, "'ncl'")) << message;
    EXPECT_TRUE(contains(message, "auto, gloo, mpi, nccl, threads")) << message;
  }
  for (const char* bad : {"0", "-5", "1.5", "ten"}) {
    EnvGuard env;
    env.set("ZEROTRAIN_COMM_TIMEOUT_S", bad);
    const std::string message = test::error_of<ConfigError>([] { apply_env({}); }, bad);
    EXPECT_TRUE(contains(message, "ZEROTRAIN_COMM_TIMEOUT_S")) << bad << ": " << message;
  }
  {
    EnvGuard env;
    env.set("ZEROTRAIN_COMM_DEBUG", "maybe");
    const std::string message = test::error_of<ConfigError>([] { apply_env({}); });
    EXPECT_TRUE(contains(message, "ZEROTRAIN_COMM_DEBUG")) << message;
  }
}

TEST(CommTypes, BackendAndReduceOpNames) {
  EXPECT_EQ(parse_backend("auto", "x"), BackendKind::kAuto);
  EXPECT_EQ(parse_backend("GLOO", "x"), BackendKind::kGloo);
  EXPECT_EQ(parse_backend("Mpi", "x"), BackendKind::kMpi);
  EXPECT_EQ(parse_backend("nccl", "x"), BackendKind::kNccl);
  EXPECT_EQ(parse_backend("threads", "x"), BackendKind::kThreads);
  for (BackendKind kind :
       {BackendKind::kAuto, BackendKind::kGloo, BackendKind::kMpi, BackendKind::kNccl, BackendKind::kThreads}) {
    EXPECT_EQ(parse_backend(to_string(kind), "x"), kind) << to_string(kind);
  }

  const std::string message = test::error_of<ConfigError>([] { parse_backend("tcp", "comm.backend"); });
  EXPECT_TRUE(contains(message, "comm.backend")) << message;
  EXPECT_TRUE(contains(message, "'tcp'")) << message;
  EXPECT_TRUE(contains(message, "auto, gloo, mpi, nccl, threads")) << message;
  EXPECT_THROW(parse_backend("", "x"), ConfigError);
  EXPECT_THROW(parse_backend(" gloo", "x"), ConfigError);

  EXPECT_STREQ(to_string(ReduceOp::kSum), "sum");
  EXPECT_STREQ(to_string(ReduceOp::kAvg), "avg");
  EXPECT_STREQ(to_string(ReduceOp::kMax), "max");
}

// ---------------------------------------------------------------- chunk_range

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

Chunks chunks(int64_t numel, int world_size) {
  Chunks out;
  for (int r = 0; r < world_size; ++r) {
    ChunkRange c = chunk_range(numel, world_size, r);
    out.emplace_back(c.offset, c.numel);
  }
  return out;
}

TEST(CommTypes, ChunkRange) {
  EXPECT_EQ(chunks(10, 4), (Chunks{{0, 3}, {3, 3}, {6, 3}, {9, 1}}));   // the last one shorter
  EXPECT_EQ(chunk_numel_max(10, 4), 3);
  EXPECT_EQ(chunks(5, 4), (Chunks{{0, 2}, {2, 2}, {4, 1}, {5, 0}}));    // and trailing ones empty
  EXPECT_EQ(chunk_numel_max(5, 4), 2);
  EXPECT_EQ(chunks(1, 3), (Chunks{{0, 1}, {1, 0}, {1, 0}}));
  EXPECT_EQ(chunks(0, 3), (Chunks{{0, 0}, {0, 0}, {0, 0}}));
  EXPECT_EQ(chunk_numel_max(0, 3), 0);
  EXPECT_EQ(chunks(8, 4), (Chunks{{0, 2}, {2, 2}, {4, 2}, {6, 2}}));
  EXPECT_EQ(chunk_numel_max(8, 4), 2);
  EXPECT_EQ(chunks(7, 1), (Chunks{{0, 7}}));
  EXPECT_THROW(chunk_range(10, 4, 4), zerotrain::Error);
  EXPECT_THROW(chunk_range(10, 4, -1), zerotrain::Error);

  // Every split: chunks of chunk_numel_max in rank order, tiling the buffer, never growing.
  for (int ws = 1; ws <= 6; ++ws) {
    for (int64_t numel = 0; numel <= 30; ++numel) {
      const int64_t max = chunk_numel_max(numel, ws);
      EXPECT_EQ(max, (numel + ws - 1) / ws);
      int64_t next = 0;
      int64_t previous = max;
      for (int r = 0; r < ws; ++r) {
        ChunkRange c = chunk_range(numel, ws, r);
        EXPECT_EQ(c.offset, next) << numel << " over " << ws << ", rank " << r;
        EXPECT_GE(c.numel, 0) << numel << " over " << ws << ", rank " << r;
        EXPECT_LE(c.numel, previous) << numel << " over " << ws << ", rank " << r;
        previous = c.numel;
        next = c.offset + c.numel;
      }
      EXPECT_EQ(next, numel) << numel << " over " << ws;
      EXPECT_EQ(chunk_range(numel, ws, 0).numel, max) << numel << " over " << ws;
    }
  }
}

}  // namespace
}  // namespace zerotrain::comm

TEST(CommConfig, OptionsFromTheCommBlock) {
  auto c = zerotrain::Config::from_string(
      R"({"train_batch_size": 8, "comm": {"backend": "mpi", "timeout_s": 2.5, "check_fingerprints": true}})");
  auto o = zerotrain::comm::options_from_config(c);
  EXPECT_EQ(o.backend, zerotrain::comm::BackendKind::kMpi);
  EXPECT_EQ(o.timeout.count(), 2500);
  EXPECT_TRUE(o.check_fingerprints);
  auto d = zerotrain::comm::options_from_config(zerotrain::Config::from_string(R"({"train_batch_size": 8})"));
  EXPECT_EQ(d.backend, zerotrain::comm::BackendKind::kAuto);
  EXPECT_EQ(d.timeout, zerotrain::comm::kDefaultTimeout);
  EXPECT_FALSE(d.check_fingerprints);
  EXPECT_THROW(zerotrain::Config::from_string(R"({"train_batch_size": 8, "comm": {"backend": "glo"}})"),
               zerotrain::ConfigError);
  EXPECT_THROW(zerotrain::Config::from_string(R"({"train_batch_size": 8, "comm": {"timeout_s": 0}})"),
               zerotrain::ConfigError);
}
