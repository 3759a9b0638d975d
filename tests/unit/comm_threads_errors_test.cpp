// The Communicator's failures on the in-process backend: argument errors before anything is
// issued, timeouts that name the missing rank and leave the communicator broken, and
// fingerprint checks that catch ranks issuing different collectives.
#include "tests/unit/comm_test_util.h"

namespace zerotrain::comm {
namespace {

using namespace test;
using namespace std::chrono_literals;


// ---------------------------------------------------------------- argument errors

TEST(ThreadCommErrors, BadArgumentsThrowBeforeAnythingIsIssued) {
  EXPECT_THROW(Communicator::make_thread_world(0), UsageError);
  EXPECT_THROW(Communicator::make_thread_world(-2), UsageError);

  // Argument checks run before the rendezvous, so one thread can drive both ranks here.
  auto world = Communicator::make_thread_world(2, options_with());
  Communicator& rank0 = world[0];
  Communicator& rank1 = world[1];
  const at::Tensor input = at::ones({9}, at::kFloat);   // chunks 5, 4

  std::string message = error_of<UsageError>([&] { (void)rank0.reduce_scatter(input, at::empty({4}, at::kFloat)); },
                                             "reduce_scatter output size");
  EXPECT_TRUE(contains(message, "chunk_range")) << message;
  EXPECT_TRUE(contains(message, "rank 0")) << message;
  EXPECT_TRUE(contains(message, "5 elements")) << message;
  message = error_of<UsageError>([&] { (void)rank1.reduce_scatter(input, at::empty({5}, at::kFloat)); },
                                 "reduce_scatter output size, rank 1");
  EXPECT_TRUE(contains(message, "chunk_range")) << message;
  EXPECT_TRUE(contains(message, "rank 1")) << message;

  message = error_of<UsageError>([&] { (void)rank0.reduce_scatter(input, at::empty({5}, at::kHalf)); },
                                 "reduce_scatter dtypes");
  EXPECT_TRUE(contains(message, "Float")) << message;
  EXPECT_TRUE(contains(message, "Half")) << message;

  message = error_of<UsageError>([&] { (void)rank1.all_gather(at::empty({5}, at::kFloat), at::empty({9}, at::kFloat)); },
                                 "all_gather input size");
  EXPECT_TRUE(contains(message, "chunk_range")) << message;
  EXPECT_THROW(rank0.all_gather(at::empty({5}, at::kLong), at::empty({9}, at::kFloat)), UsageError);

  message = error_of<UsageError>([&] { (void)rank0.broadcast(at::ones({3}), 2); }, "broadcast root 2");
  EXPECT_TRUE(contains(message, "root 2")) << message;
  EXPECT_THROW(rank0.broadcast(at::ones({3}), -1), UsageError);

  EXPECT_THROW(rank0.all_reduce(at::Tensor()), UsageError);
  EXPECT_THROW(rank0.all_gather(at::Tensor(), at::empty({9})), UsageError);
  EXPECT_THROW(rank0.all_reduce(at::ones({3}, at::kBool)), NotSupported);
  EXPECT_THROW(rank0.all_reduce(at::ones({3}).to_sparse()), NotSupported);

  EXPECT_THROW(rank0.reduce_scatter_coalesced({input}, {}), UsageError);
  EXPECT_THROW(rank0.reduce_scatter_coalesced({input, at::ones({2}, at::kDouble)},
                                              {at::empty({5}), at::empty({1}, at::kDouble)}),
               UsageError);
  message = error_of<UsageError>(
      [&] { (void)rank0.reduce_scatter_coalesced({input, input}, {at::empty({5}), at::empty({4})}); },
      "reduce_scatter_coalesced output size");
  EXPECT_TRUE(contains(message, "output 1")) << message;
  EXPECT_THROW(rank1.all_gather_coalesced({at::empty({5})}, {at::empty({9})}), UsageError);
  EXPECT_THROW(rank0.all_reduce_coalesced({at::ones({2}), at::Tensor()}), UsageError);

  EXPECT_EQ(rank0.issued(), 0);
  EXPECT_EQ(rank1.issued(), 0);

  // A rejected call leaves the communicators usable.
  run_world(world, [&](Communicator& comm, int rank) {
    at::Tensor t = input_for(rank, 9, at::kFloat, 1);
    comm.all_reduce(t).wait();
    expect_same(t, reference(2, 9, at::kFloat, 1, ReduceOp::kSum), "all_reduce after rejected calls");
    EXPECT_EQ(comm.issued(), 1);
  });
}

// ---------------------------------------------------------------- timeouts

TEST(ThreadCommTimeout, MissingRankIsNamedAndTheCommunicatorIsBroken) {
  auto world = Communicator::make_thread_world(2, options_with(25 << 20, false, 300ms));
  std::thread rank0([&] {
    Communicator& comm = world[0];
    at::Tensor t = at::ones({8});
    const auto start = std::chrono::steady_clock::now();
    Work work = comm.all_reduce(t);
    std::string message = error_of<TimeoutError>([&] { work.wait(); }, "rank 0's wait");
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed, 290ms);
    EXPECT_LT(elapsed, 5s);
    EXPECT_TRUE(contains(message, "all_reduce(Float, 8 elements, sum)")) << message;
    EXPECT_TRUE(contains(message, "#1")) << message;
    EXPECT_TRUE(contains(message, "rank 0")) << message;
    EXPECT_TRUE(contains(message, "ranks that did not arrive: 1 (no collective issued yet)")) << message;

    // Waiting again rethrows the same error.
    EXPECT_EQ(error_of<TimeoutError>([&] { work.wait(); }, "second wait"), message);

    message = error_of<CommError>([&] { comm.barrier().wait(); }, "collective after the timeout");
    EXPECT_TRUE(contains(message, "unusable")) << message;
    EXPECT_TRUE(contains(message, "timed out")) << message;
    EXPECT_EQ(comm.issued(), 1);
  });
  rank0.join();   // rank 1 never issues anything

  // Rank 1 arriving late gets an error at once, not a hang.
  std::thread rank1([&] {
    Communicator& comm = world[1];
    at::Tensor t = at::ones({8});
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_of<CommError>([&] { comm.all_reduce(t).wait(); }, "rank 1 after the timeout");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms);
    EXPECT_TRUE(contains(message, "broken")) << message;
  });
  rank1.join();
}

TEST(ThreadCommTimeout, MissingRankShowsItsLastCollective) {
  auto world = Communicator::make_thread_world(3, options_with(25 << 20, false, 300ms));
  run_world(world, [&](Communicator& comm, int rank) {
    comm.barrier().wait();
    if (rank == 2) return;   // rank 2 stops after the barrier; ranks 0 and 1 go on
    at::Tensor t = at::ones({4}, at::kHalf);
    const std::string message =
        error_of<TimeoutError>([&] { comm.all_reduce(t, ReduceOp::kAvg).wait(); }, "rank " + std::to_string(rank));
    EXPECT_TRUE(contains(message, "all_reduce(Half, 4 elements, avg)")) << message;
    EXPECT_TRUE(contains(message, "#2")) << message;
    EXPECT_TRUE(contains(message, "ranks that did not arrive: 2 (last issued #1 barrier())")) << message;
  });
}

// A coalesced call and a fingerprint check time out the same way (two worlds, side by side).
TEST(ThreadCommTimeout, CoalescedCallsAndFingerprintChecksTimeOut) {
  auto coalesced = Communicator::make_thread_world(2, options_with(64, false, 300ms));
  auto checked = Communicator::make_thread_world(2, options_with(25 << 20, true, 300ms));
  std::thread a([&] {
    std::vector<at::Tensor> tensors = {at::ones({20}), at::ones({20}), at::ones({20})};   // 3 buckets
    const std::string message = error_of<TimeoutError>(
        [&] { coalesced[0].all_reduce_coalesced(tensors).wait(); }, "all_reduce_coalesced");
    EXPECT_TRUE(contains(message, "all_reduce(Float, 20 elements, sum)")) << message;
    EXPECT_TRUE(contains(message, "#1")) << message;
    EXPECT_TRUE(contains(message, "1 (no collective issued yet)")) << message;
    EXPECT_THROW(coalesced[0].barrier(), CommError);
  });
  std::thread b([&] {
    at::Tensor t = at::ones({8});
    // With fingerprints on, the check runs while issuing: the call itself throws.
    const std::string message =
        error_of<TimeoutError>([&] { (void)checked[0].all_reduce(t); }, "all_reduce with fingerprint checks");
    EXPECT_TRUE(contains(message, "fingerprint check of all_reduce(Float, 8 elements, sum)")) << message;
    EXPECT_TRUE(contains(message, "#1")) << message;
    EXPECT_TRUE(contains(message, "1 (no collective issued yet)")) << message;
  });
  a.join();
  b.join();
}

// ---------------------------------------------------------------- fingerprints

TEST(ThreadCommFingerprints, MismatchFailsOnEveryRank) {
  {
    SCOPED_TRACE("different element counts");
    auto world = Communicator::make_thread_world(2, options_with(25 << 20, true));
    run_world(world, [&](Communicator& comm, int rank) {
      at::Tensor t = at::ones({8 + rank});
      // The check runs while the collective is issued: all_reduce() itself throws.
      const std::string message =
          error_of<CommError>([&] { (void)comm.all_reduce(t); }, "rank " + std::to_string(rank));
      EXPECT_TRUE(contains(message, "fingerprint")) << message;
      EXPECT_TRUE(contains(message, "rank 0: #1 all_reduce(Float, 8 elements, sum)")) << message;
      EXPECT_TRUE(contains(message, "rank 1: #1 all_reduce(Float, 9 elements, sum)")) << message;
      expect_same(t, at::ones({8 + rank}), "the tensor of a rejected collective");
      EXPECT_EQ(comm.issued(), 1);
      const std::string next = error_of<CommError>([&] { comm.barrier().wait(); }, "after the mismatch");
      EXPECT_TRUE(contains(next, "unusable")) << next;
      EXPECT_TRUE(contains(next, "fingerprint mismatch at collective #1")) << next;
    });
  }
  {
    SCOPED_TRACE("different collectives");
    auto world = Communicator::make_thread_world(2, options_with(25 << 20, true));
    run_world(world, [&](Communicator& comm, int rank) {
      at::Tensor t = at::ones({8});
      const std::string message = error_of<CommError>(
          [&] {
            if (rank == 0) {
              comm.all_reduce(t, ReduceOp::kMax).wait();
            } else {
              comm.broadcast(t, 0).wait();
            }
          },
          "rank " + std::to_string(rank));
      EXPECT_TRUE(contains(message, "rank 0: #1 all_reduce(Float, 8 elements, max)")) << message;
      EXPECT_TRUE(contains(message, "rank 1: #1 broadcast(Float, 8 elements, root 0)")) << message;
    });
  }
  {
    SCOPED_TRACE("one rank of three with another dtype, after a matching barrier");
    auto world = Communicator::make_thread_world(3, options_with(25 << 20, true));
    run_world(world, [&](Communicator& comm, int rank) {
      comm.barrier().wait();
      at::Tensor t = at::ones({4}, rank == 2 ? at::kBFloat16 : at::kFloat);
      const std::string message =
          error_of<CommError>([&] { comm.all_reduce(t).wait(); }, "rank " + std::to_string(rank));
      EXPECT_TRUE(contains(message, "collective #2")) << message;
      EXPECT_TRUE(contains(message, "rank 0: #2 all_reduce(Float, 4 elements, sum)")) << message;
      EXPECT_TRUE(contains(message, "rank 2: #2 all_reduce(BFloat16, 4 elements, sum)")) << message;
      EXPECT_EQ(comm.issued(), 2);
    });
  }
}

TEST(ThreadCommFingerprints, MatchingCollectivesPass) {
  const int ws = 3;
  auto world = Communicator::make_thread_world(ws, options_with(64, true));
  run_world(world, [&](Communicator& comm, int rank) {
    at::Tensor a = input_for(rank, 10, at::kHalf, 1);
    comm.all_reduce(a, ReduceOp::kAvg).wait();
    expect_same(a, reference(ws, 10, at::kHalf, 1, ReduceOp::kAvg), "all_reduce");
    const ChunkRange mine = chunk_range(10, ws, rank);
    at::Tensor out = at::empty({mine.numel}, at::kLong);
    comm.reduce_scatter(input_for(rank, 10, at::kLong, 2), out, ReduceOp::kAvg).wait();
    expect_same(out, reference(ws, 10, at::kLong, 2, ReduceOp::kAvg).narrow(0, mine.offset, mine.numel),
                "reduce_scatter");
    at::Tensor b = input_for(rank, 5, at::kDouble, 3);
    comm.broadcast(b, 2).wait();
    expect_same(b, input_for(2, 5, at::kDouble, 3), "broadcast");
    comm.barrier().wait();
    EXPECT_EQ(comm.issued(), 4);
    std::vector<at::Tensor> tensors = {input_for(rank, 20, at::kFloat, 4), input_for(rank, 20, at::kFloat, 5)};
    comm.all_reduce_coalesced(tensors).wait();   // 80 bytes each: two buckets
    expect_same(tensors[0], reference(ws, 20, at::kFloat, 4, ReduceOp::kSum), "all_reduce_coalesced 0");
    expect_same(tensors[1], reference(ws, 20, at::kFloat, 5, ReduceOp::kSum), "all_reduce_coalesced 1");
    EXPECT_EQ(comm.issued(), 6);
  });
}

}  // namespace
}  // namespace zerotrain::comm
