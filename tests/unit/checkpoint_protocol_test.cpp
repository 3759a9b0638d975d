// The checkpoint transaction with providers that are not the engine's: what a Python or
// pipeline engine would register. Two ranks in threads, over the thread world's collectives.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

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

  void save(RankFileContents& file) override {
    if (file.rank() == fail_save_on) throw zerotrain::IoError("the counter cannot be saved here", "test");
    file.add("counter/value", at::full({3}, static_cast<float>(file.rank() + 10)));
  }
  void describe(Manifest& m) override {
    m.counters.global_steps = 7;
    m.rank_tensors.push_back({"counter/value", "F32"});
  }
  void plan_load(LoadPlan& plan) override {
    if (plan.rank() == fail_plan_on) throw zerotrain::CheckpointError("the counter does not fit this rank");
    loaded = plan.read_now(plan.rank(), "counter/value", zerotrain::checkpoint::Dtype::kF32, {3});
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

}  // namespace
