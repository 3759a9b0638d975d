// The checkpoint transaction with providers that are not the engine's: what a Python or
// pipeline engine would register. Two ranks in threads, over the thread world's collectives.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <thread>

#include "tests/support/write_gate.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/protocol/async_save.h"
#include "zerotrain/checkpoint/protocol/load.h"
#include "zerotrain/checkpoint/protocol/save.h"
#include "zerotrain/checkpoint/reader.h"

namespace {

namespace fs = std::filesystem;
using zerotrain::checkpoint::LoadPlan;
using zerotrain::checkpoint::Manifest;
using zerotrain::checkpoint::RankFileContents;
using zerotrain::comm::Communicator;

// Saves a tensor holding its rank's number, and the step in the manifest's counters; a load
// reads the tensor back. `fail_save` / `fail_plan` make it throw on one rank.
struct Counter final : zerotrain::checkpoint::StateProvider {
  int fail_save_on = -1, fail_plan_on = -1;
  std::vector<std::string>* events = nullptr;
  at::Tensor loaded;
  at::Tensor live;   // saved as it is, when defined (the state training would go on changing)
  // Also saved, when defined: ranges of two views of one buffer, the second inside the first
  // (elements [10, 20) through the inner view, [50, 100) through the outer one).
  at::Tensor nested;
  at::Tensor loaded_inner, loaded_outer;

  void save(RankFileContents& file) override {
    if (file.rank() == fail_save_on) throw zerotrain::IoError("the counter cannot be saved here", "test");
    file.add("counter/value", live.defined() ? live : at::full({3}, static_cast<float>(file.rank() + 10)));
    if (nested.defined()) {
      const at::Tensor outer = file.hold(nested), inner = file.hold(nested.narrow(0, 10, 10));
      file.add_fp32_range("nested/inner", inner, 0, 10);
      file.add_fp32_range("nested/outer", outer, 50, 50);
    }
  }
  void describe(Manifest& m) override {
    m.counters.global_steps = 7;
    m.rank_tensors.push_back({"counter/value", "F32"});
    if (nested.defined()) {
      m.rank_tensors.push_back({"nested/inner", "F32"});
      m.rank_tensors.push_back({"nested/outer", "F32"});
    }
  }
  void plan_load(LoadPlan& plan) override {
    if (plan.rank() == fail_plan_on) throw zerotrain::CheckpointError("the counter does not fit this rank");
    loaded = plan.read_now(plan.rank(), "counter/value", zerotrain::checkpoint::Dtype::kF32, {3});
    if (nested.defined()) {
      loaded_inner = plan.read_now(plan.rank(), "nested/inner", zerotrain::checkpoint::Dtype::kF32, {10});
      loaded_outer = plan.read_now(plan.rank(), "nested/outer", zerotrain::checkpoint::Dtype::kF32, {50});
    }
  }
  void commit_load(const Manifest& m) override { events->push_back("commit " + std::to_string(m.counters.global_steps)); }
};

struct Rank {
  Counter counter;
  std::vector<std::string> events;
  std::string error;
};

// Runs `body` on both ranks of a thread world, each with its own providers.
void on_two_ranks(std::vector<Rank>& ranks, const std::function<void(Communicator&, Rank&)>& body) {
  auto world = Communicator::make_thread_world(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(world[static_cast<size_t>(r)], ranks[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        ranks[static_cast<size_t>(r)].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

zerotrain::checkpoint::Providers providers_of(Rank& rank) {
  zerotrain::checkpoint::Providers out;
  struct Forward final : zerotrain::checkpoint::StateProvider {
    Counter* c;
    explicit Forward(Counter* counter) : c(counter) {}
    void save(RankFileContents& f) override { c->save(f); }
    void describe(Manifest& m) override { c->describe(m); }
    void plan_load(LoadPlan& p) override { c->plan_load(p); }
    void commit_load(const Manifest& m) override { c->commit_load(m); }
  };
  rank.counter.events = &rank.events;
  out.push_back(std::make_unique<Forward>(&rank.counter));
  return out;
}

class CheckpointProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zt_protocol_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void save(std::vector<Rank>& ranks, const std::string& tag) {
    on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
      zerotrain::checkpoint::SaveRequest request;
      request.save_dir = dir_;
      request.tag = tag;
      request.client_state = {{"epoch", 3}};
      zerotrain::checkpoint::save(comm, providers_of(rank), request);
    });
  }
  void load(std::vector<Rank>& ranks) {
    on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
      const auto loaded = zerotrain::checkpoint::load(comm, providers_of(rank), {dir_, ""});
      ASSERT_TRUE(loaded.has_value());
      EXPECT_EQ(loaded->manifest.client_state["epoch"], 3);
    });
  }

  fs::path dir_;
};

TEST_F(CheckpointProtocol, EachRanksTensorsAndTheManifestComeBack) {
  std::vector<Rank> saving(2);
  save(saving, "t1");
  for (const Rank& r : saving) ASSERT_EQ(r.error, "");
  std::vector<Rank> loading(2);
  load(loading);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(loading[r].error, "");
    EXPECT_TRUE(at::equal(loading[r].counter.loaded, at::full({3}, static_cast<float>(r + 10))));
    EXPECT_EQ(loading[r].events, std::vector<std::string>{"commit 7"});
  }
}

TEST_F(CheckpointProtocol, APlanThatFailsOnOneRankCommitsNothingOnAny) {
  std::vector<Rank> saving(2);
  save(saving, "t1");
  std::vector<Rank> loading(2);
  loading[1].counter.fail_plan_on = 1;
  load(loading);
  for (const Rank& r : loading) {
    EXPECT_NE(r.error.find("failed on 1 of 2 rank(s):\n  rank 1: "), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("the counter does not fit this rank"), std::string::npos) << r.error;
    EXPECT_TRUE(r.events.empty()) << "a rank committed a load that failed elsewhere";
  }
}

TEST_F(CheckpointProtocol, ASaveThatFailsOnOneRankLeavesThePreviousCheckpoint) {
  std::vector<Rank> first(2);
  save(first, "t1");
  std::vector<Rank> second(2);
  second[0].counter.fail_save_on = 0;
  save(second, "t2");
  for (const Rank& r : second) EXPECT_NE(r.error.find("the counter cannot be saved here"), std::string::npos) << r.error;
  EXPECT_EQ(zerotrain::checkpoint::read_latest_tag(dir_).value_or(""), "t1");
  EXPECT_FALSE(fs::exists(dir_ / "t2"));
  EXPECT_FALSE(fs::exists(dir_ / ".t2.partial"));
  std::vector<Rank> loading(2);
  load(loading);
  for (const Rank& r : loading) EXPECT_EQ(r.error, "");
}

// ---- Asynchronous saves ----

zerotrain::checkpoint::SaveRequest request_for(const fs::path& dir, const std::string& tag) {
  zerotrain::checkpoint::SaveRequest request;
  request.save_dir = dir;
  request.tag = tag;
  request.client_state = {{"epoch", 3}};
  return request;
}

TEST_F(CheckpointProtocol, AnAsyncSaveSavesTheStateAtTheSaveAndPublishesOnlyWhenEveryRankWrote) {
  std::vector<Rank> first(2);
  save(first, "t1");
  std::vector<Rank> ranks(2);
  std::vector<std::string> before_release(2), latest_while_writing(2);
  std::vector<int> published(2, 0);
  {
    zerotrain::test::WriteGate held;
    on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
      const int r = comm.rank();
      rank.counter.live = at::full({3}, static_cast<float>(r + 20));
      std::vector<at::Tensor> reuse;
      auto pending = zerotrain::checkpoint::AsyncSave::start(comm, providers_of(rank), request_for(dir_, "t2"), reuse);
      ASSERT_NE(pending, nullptr);
      rank.counter.live.fill_(-1.0f);   // training goes on changing the state
      // Both writers are held: polling publishes nothing, on every rank alike.
      for (int i = 0; i < 3; ++i) {
        if (pending->finish(comm, false)) ++published[static_cast<size_t>(r)];
      }
      latest_while_writing[static_cast<size_t>(r)] = zerotrain::checkpoint::read_latest_tag(dir_).value_or("");
      if (r == 0) before_release[0] = fs::exists(dir_ / ".t2.partial") ? "staging" : "no staging";
      comm.barrier().wait();
      if (r == 0) held.open();
      const auto saved = pending->finish(comm, true);
      ASSERT_TRUE(saved.has_value());
      EXPECT_EQ(saved->dir, dir_ / "t2");
    });
  }
  for (const Rank& r : ranks) EXPECT_EQ(r.error, "");
  EXPECT_EQ(published, (std::vector<int>{0, 0}));
  EXPECT_EQ(latest_while_writing, (std::vector<std::string>{"t1", "t1"}));
  EXPECT_EQ(before_release[0], "staging");
  EXPECT_EQ(zerotrain::checkpoint::read_latest_tag(dir_).value_or(""), "t2");
  std::vector<Rank> loading(2);
  load(loading);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(loading[static_cast<size_t>(r)].error, "");
    EXPECT_TRUE(at::equal(loading[static_cast<size_t>(r)].counter.loaded, at::full({3}, static_cast<float>(r + 20))))
        << "rank " << r << " loaded what training wrote after the save";
  }
}

TEST_F(CheckpointProtocol, AnAsyncSaveSnapshotsRangesOfNestedViewsOfOneBuffer) {
  std::vector<Rank> ranks(2);
  {
    zerotrain::test::WriteGate held;
    on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
      rank.counter.nested = at::arange(100, at::kFloat);
      std::vector<at::Tensor> reuse;
      auto pending = zerotrain::checkpoint::AsyncSave::start(comm, providers_of(rank), request_for(dir_, "t1"), reuse);
      ASSERT_NE(pending, nullptr);
      rank.counter.nested.fill_(-1.0f);
      comm.barrier().wait();
      if (comm.rank() == 0) held.open();
      ASSERT_TRUE(pending->finish(comm, true).has_value());
    });
  }
  for (const Rank& r : ranks) EXPECT_EQ(r.error, "");
  std::vector<Rank> loading(2);
  for (Rank& r : loading) r.counter.nested = at::zeros({100});
  load(loading);
  for (const Rank& r : loading) {
    EXPECT_EQ(r.error, "");
    EXPECT_TRUE(at::equal(r.counter.loaded_inner, at::arange(10, 20, at::kFloat)));
    EXPECT_TRUE(at::equal(r.counter.loaded_outer, at::arange(50, 100, at::kFloat)));
  }
}

TEST_F(CheckpointProtocol, AnAsyncSaveWritesTheBytesOfASynchronousOne) {
  std::vector<Rank> ranks(2);
  on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
    rank.counter.live = at::arange(1000, at::kFloat) * static_cast<float>(comm.rank() + 1);
    zerotrain::checkpoint::save(comm, providers_of(rank), request_for(dir_, "sync"));
    std::vector<at::Tensor> reuse;
    auto pending = zerotrain::checkpoint::AsyncSave::start(comm, providers_of(rank), request_for(dir_, "async"), reuse);
    ASSERT_NE(pending, nullptr);
    ASSERT_TRUE(pending->finish(comm, true).has_value());
  });
  for (const Rank& r : ranks) EXPECT_EQ(r.error, "");
  const auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const char* file : {"rank_00000.safetensors", "rank_00001.safetensors"}) {
    const std::string a = read(dir_ / "sync" / file), b = read(dir_ / "async" / file);
    EXPECT_GT(a.size(), 4000u) << file;
    EXPECT_TRUE(a == b) << file << " differs between the synchronous and the background save";
  }
}

TEST_F(CheckpointProtocol, AnAsyncWriteThatFailsOnOneRankFailsTheSaveOnEveryRank) {
  std::vector<Rank> first(2);
  save(first, "t1");
  zerotrain::checkpoint::set_write_observer([](const fs::path& path, int64_t) {
    if (path.filename() == "rank_00001.safetensors") throw zerotrain::IoError("the disk went away", "test");
  });
  std::vector<Rank> ranks(2);
  on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
    std::vector<at::Tensor> reuse;
    auto pending = zerotrain::checkpoint::AsyncSave::start(comm, providers_of(rank), request_for(dir_, "t2"), reuse);
    ASSERT_NE(pending, nullptr);
    pending->finish(comm, true);
  });
  zerotrain::checkpoint::set_write_observer(nullptr);
  for (const Rank& r : ranks) {
    EXPECT_NE(r.error.find("rank 1: [test] the disk went away"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("the disk went away"), std::string::npos) << r.error;
  }
  EXPECT_EQ(zerotrain::checkpoint::read_latest_tag(dir_).value_or(""), "t1");
  EXPECT_FALSE(fs::exists(dir_ / "t2"));
  EXPECT_FALSE(fs::exists(dir_ / ".t2.partial"));
}

TEST_F(CheckpointProtocol, AnAsyncSaveWithoutMemoryForItsSnapshotSavesSynchronously) {
  // One rank's available memory is below its snapshot: every rank saves synchronously.
  std::vector<Rank> ranks(2);
  ::setenv("ZEROTRAIN_MEMORY_AVAILABLE", "8B", 1);
  on_two_ranks(ranks, [&](Communicator& comm, Rank& rank) {
    std::vector<at::Tensor> reuse;
    auto pending = zerotrain::checkpoint::AsyncSave::start(comm, providers_of(rank), request_for(dir_, "t1"), reuse);
    EXPECT_EQ(pending, nullptr);
  });
  ::unsetenv("ZEROTRAIN_MEMORY_AVAILABLE");
  for (const Rank& r : ranks) EXPECT_EQ(r.error, "");
  EXPECT_EQ(zerotrain::checkpoint::read_latest_tag(dir_).value_or(""), "t1");
  std::vector<Rank> loading(2);
  load(loading);
  for (const Rank& r : loading) EXPECT_EQ(r.error, "");
}

}  // namespace
