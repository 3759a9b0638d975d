// The Communicator on the in-process backend (make_thread_world): every collective at world
// sizes 2-4 and in every dtype the engine uses, with element counts that the world size does
// not divide, and the coalesced forms over several buckets. Each rank runs on its own thread;
// inputs are small integers, exact in fp16/bf16, so results are compared exactly with a
// reference computed here. Errors, timeouts and fingerprints: comm_threads_errors_test.cpp.
#include "tests/unit/comm_test_util.h"

namespace zerotrain::comm {
namespace {

using namespace test;
using namespace std::chrono_literals;

// ---------------------------------------------------------------- parameterized collectives
//
// One ctest entry costs ~0.4 s of LibTorch loading, so each (world size, dtype) instance runs
// every plain collective (or every coalesced one) over several element counts or bucket sizes;
// each failure message names the rank, world size, dtype and element count.

using WorldParam = std::tuple<int, at::ScalarType>;

class ThreadCollectives : public ::testing::TestWithParam<WorldParam> {
 protected:
  int ws() const { return std::get<0>(GetParam()); }
  at::ScalarType dtype() const { return std::get<1>(GetParam()); }
  std::string where(int rank, const std::string& more) const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(ws()) + ", " + c10::toString(dtype()) + ", " +
           more;
  }
};

// all_reduce sum/avg/max, reduce_scatter sum/avg/max, all_gather, broadcast from the first and
// the last rank and barrier, in that order on one world, for 1 element (fewer than ranks:
// empty chunks), 4*ws (even chunks) and 4*ws+1 (uneven chunks).
TEST_P(ThreadCollectives, Plain) {
  for (const int64_t numel : {int64_t{1}, int64_t{4} * ws(), int64_t{4} * ws() + 1}) {
    auto world = Communicator::make_thread_world(ws(), options_with());
    run_world(world, [&](Communicator& comm, int rank) {
      const std::string n = std::to_string(numel) + " elements";
      EXPECT_EQ(comm.rank(), rank);
      EXPECT_EQ(comm.world_size(), ws());
      EXPECT_EQ(comm.backend(), BackendKind::kThreads);
      EXPECT_EQ(comm.issued(), 0);
      int64_t issued = 0;

      for (ReduceOp op : kOps) {
        const int salt = static_cast<int>(op);
        at::Tensor t = input_for(rank, numel, dtype(), salt);
        Work work = comm.all_reduce(t, op);
        work.wait();
        EXPECT_TRUE(work.is_completed());
        EXPECT_EQ(comm.issued(), ++issued);
        expect_same(t, reference(ws(), numel, dtype(), salt, op), where(rank, n + ", all_reduce " + name_of(op)));
      }

      const ChunkRange mine = chunk_range(numel, ws(), rank);
      for (ReduceOp op : kOps) {
        const int salt = 10 + static_cast<int>(op);
        const std::string what = where(rank, n + ", reduce_scatter " + name_of(op));
        at::Tensor input = input_for(rank, numel, dtype(), salt);
        at::Tensor output = at::full({mine.numel}, 42, dtype());
        comm.reduce_scatter(input, output, op).wait();
        EXPECT_EQ(comm.issued(), ++issued);
        expect_same(output, reference(ws(), numel, dtype(), salt, op).narrow(0, mine.offset, mine.numel), what);
        expect_same(input, input_for(rank, numel, dtype(), salt), what + ": the input changed");
      }

      {
        // Rank r contributes its chunk of its own input_for(r, ...): the output is every
        // rank's chunk, in rank order.
        std::vector<at::Tensor> parts;
        for (int r = 0; r < ws(); ++r) {
          const ChunkRange c = chunk_range(numel, ws(), r);
          parts.push_back(input_for(r, numel, dtype(), 20).narrow(0, c.offset, c.numel));
        }
        at::Tensor output = at::full({numel}, 42, dtype());
        Work work = comm.all_gather(parts[rank].clone(), output);
        work.wait();
        work.wait();   // waiting twice is harmless
        EXPECT_EQ(comm.issued(), ++issued);
        expect_same(output, at::cat(parts), where(rank, n + ", all_gather"));
      }

      for (int root : {0, ws() - 1}) {
        at::Tensor t = input_for(rank, numel, dtype(), 30 + root);
        comm.broadcast(t, root).wait();
        EXPECT_EQ(comm.issued(), ++issued);
        expect_same(t, input_for(root, numel, dtype(), 30 + root),
                    where(rank, n + ", broadcast from root " + std::to_string(root)));
      }

      Work barrier = comm.barrier();
      barrier.wait();
      EXPECT_TRUE(barrier.is_completed());
      EXPECT_EQ(comm.issued(), ++issued);
    });
  }
}

// How many collectives a coalesced call issues: consecutive runs of one dtype, each cut where
// it would pass `cap` bytes (CommOptions::bucket_nbytes; 0: no cut).
int64_t bucket_count(const std::vector<at::Tensor>& tensors, int64_t cap) {
  int64_t buckets = 0;
  int64_t bytes = 0;
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (const auto& t : tensors) {
    const int64_t nbytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (buckets == 0 || t.scalar_type() != dtype || (cap > 0 && bytes + nbytes > cap)) {
      ++buckets;
      bytes = 0;
      dtype = t.scalar_type();
    }
    bytes += nbytes;
  }
  return buckets;
}

// all_reduce_coalesced sum/avg/max over mixed dtypes and shapes (a 2-D tensor, a transposed
// view, an empty tensor), reduce_scatter_coalesced sum/avg/max and all_gather_coalesced over
// uneven sizes, with 64-byte buckets (several per call) and with bucket_nbytes 0 (one bucket
// per dtype run).
TEST_P(ThreadCollectives, Coalesced) {
  for (const int64_t bucket_nbytes : {int64_t{64}, int64_t{0}}) {
    auto world = Communicator::make_thread_world(ws(), options_with(bucket_nbytes));
    run_world(world, [&](Communicator& comm, int rank) {
      const std::string b = "buckets of " + std::to_string(bucket_nbytes) + " bytes";
      int64_t issued = 0;

      struct Spec {
        at::ScalarType dtype;
        std::vector<int64_t> shape;
        bool transposed;
      };
      const std::vector<Spec> specs = {
          {dtype(), {5}, false},    {dtype(), {3, 4}, false}, {at::kLong, {7}, false}, {dtype(), {4, 3}, true},
          {at::kDouble, {2}, false}, {dtype(), {0}, false},   {dtype(), {13}, false},  {at::kFloat, {1}, false},
      };
      for (ReduceOp op : kOps) {
        const int salt = 40 + 10 * static_cast<int>(op);
        std::vector<at::Tensor> tensors, expected;
        for (size_t k = 0; k < specs.size(); ++k) {
          const Spec& s = specs[k];
          const int64_t n = numel_of(s.shape);
          at::Tensor t = input_for(rank, n, s.dtype, salt + static_cast<int>(k)).view(s.shape);
          at::Tensor e = reference(ws(), n, s.dtype, salt + static_cast<int>(k), op).view(s.shape);
          if (s.transposed) {
            t = t.t();
            e = e.t();
            ASSERT_FALSE(t.is_contiguous());
          }
          tensors.push_back(t);
          expected.push_back(e);
        }
        const at::Tensor transposed = tensors[3];
        comm.all_reduce_coalesced(tensors, op).wait();
        issued += bucket_count(tensors, bucket_nbytes);
        EXPECT_EQ(comm.issued(), issued) << where(rank, b);
        for (size_t k = 0; k < tensors.size(); ++k) {
          expect_same(tensors[k], expected[k],
                      where(rank, b + ", all_reduce_coalesced " + name_of(op) + ", tensor " + std::to_string(k)));
        }
        EXPECT_TRUE(tensors[3].is_same(transposed)) << "the non-contiguous tensor was replaced, not written";
      }
      EXPECT_GE(issued, 3 * 4) << "every dtype run is at least one bucket";

      const int64_t before_reduce_scatter = issued;
      const std::vector<std::vector<int64_t>> rs_shapes = {{4 * ws() + 1}, {1}, {3, 5}, {0}, {2 * ws()}, {ws() + 2}};
      for (ReduceOp op : kOps) {
        const int salt = 80 + 10 * static_cast<int>(op);
        std::vector<at::Tensor> inputs, outputs, expected;
        for (size_t k = 0; k < rs_shapes.size(); ++k) {
          const int64_t n = numel_of(rs_shapes[k]);
          const ChunkRange mine = chunk_range(n, ws(), rank);
          inputs.push_back(input_for(rank, n, dtype(), salt + static_cast<int>(k)).view(rs_shapes[k]));
          outputs.push_back(at::full({mine.numel}, 42, dtype()));
          expected.push_back(
              reference(ws(), n, dtype(), salt + static_cast<int>(k), op).narrow(0, mine.offset, mine.numel));
        }
        comm.reduce_scatter_coalesced(inputs, outputs, op).wait();
        issued += bucket_count(inputs, bucket_nbytes);
        EXPECT_EQ(comm.issued(), issued) << where(rank, b);
        for (size_t k = 0; k < rs_shapes.size(); ++k) {
          expect_same(outputs[k], expected[k],
                      where(rank, b + ", reduce_scatter_coalesced " + name_of(op) + ", tensor " + std::to_string(k)));
        }
      }
      if (bucket_nbytes == 0) {
        EXPECT_EQ(issued - before_reduce_scatter, 3) << "bucket_nbytes 0: one bucket per call";
      } else {
        EXPECT_GT(issued - before_reduce_scatter, 3) << "expected several buckets per call";
      }

      // Output shapes; the 4th output is a transposed (non-contiguous) 3x5 view.
      const std::vector<std::vector<int64_t>> ag_shapes = {{4 * ws() + 1}, {1}, {3, 5}, {5, 3}, {0}, {2 * ws()}};
      std::vector<at::Tensor> inputs, outputs, expected;
      for (size_t k = 0; k < ag_shapes.size(); ++k) {
        const int salt = 120 + static_cast<int>(k);
        const int64_t n = numel_of(ag_shapes[k]);
        std::vector<at::Tensor> parts;
        for (int r = 0; r < ws(); ++r) {
          const ChunkRange c = chunk_range(n, ws(), r);
          parts.push_back(input_for(r, n, dtype(), salt).narrow(0, c.offset, c.numel));
        }
        inputs.push_back(parts[rank].clone());
        const at::Tensor flat = at::cat(parts);
        if (k == 3) {
          outputs.push_back(at::full({5, 3}, 42, dtype()).t());
          expected.push_back(flat.view({3, 5}));
        } else {
          outputs.push_back(at::full(ag_shapes[k], 42, dtype()));
          expected.push_back(flat.view(ag_shapes[k]));
        }
      }
      ASSERT_FALSE(outputs[3].is_contiguous());
      const int64_t before_all_gather = issued;
      comm.all_gather_coalesced(inputs, outputs).wait();
      issued += bucket_count(outputs, bucket_nbytes);
      EXPECT_EQ(comm.issued(), issued) << where(rank, b);
      if (bucket_nbytes == 0) {
        EXPECT_EQ(issued - before_all_gather, 1);
      } else {
        EXPECT_GT(issued - before_all_gather, 1) << "expected several buckets";
      }
      for (size_t k = 0; k < ag_shapes.size(); ++k) {
        expect_same(outputs[k], expected[k], where(rank, b + ", all_gather_coalesced, tensor " + std::to_string(k)));
      }
    });
  }
}

std::string world_name(const ::testing::TestParamInfo<WorldParam>& info) {
  return "ws" + std::to_string(std::get<0>(info.param)) + "_" + c10::toString(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Comm, ThreadCollectives,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(at::kFloat, at::kHalf, at::kBFloat16, at::kDouble,
                                                              at::kLong)),
                         world_name);

// ---------------------------------------------------------------- layouts, edge cases

TEST(ThreadComm, NonContiguousOffsetAndAliasedTensors) {
  const int ws = 3;
  auto world = Communicator::make_thread_world(ws, options_with());
  run_world(world, [&](Communicator& comm, int rank) {
    // all_reduce of a transposed view writes through to the base tensor.
    at::Tensor base = input_for(rank, 12, at::kFloat, 1).view({4, 3});
    at::Tensor view = base.t();
    comm.all_reduce(view, ReduceOp::kSum).wait();
    expect_same(base, reference(ws, 12, at::kFloat, 1, ReduceOp::kSum).view({4, 3}), "transposed all_reduce");

    // all_reduce of a contiguous view at an offset leaves the rest of the storage alone.
    at::Tensor big = at::full({10}, 42, at::kLong);
    big.narrow(0, 3, 5).copy_(input_for(rank, 5, at::kLong, 2));
    comm.all_reduce(big.narrow(0, 3, 5), ReduceOp::kMax).wait();
    expect_same(big.narrow(0, 3, 5), reference(ws, 5, at::kLong, 2, ReduceOp::kMax), "offset all_reduce");
    expect_same(big.narrow(0, 0, 3), at::full({3}, 42, at::kLong), "offset all_reduce, before the view");
    expect_same(big.narrow(0, 8, 2), at::full({2}, 42, at::kLong), "offset all_reduce, after the view");

    // reduce_scatter of a transposed input (chunks follow its logical order) into a strided output.
    const int64_t n = 20;   // 7, 7, 6
    const ChunkRange mine = chunk_range(n, ws, rank);
    at::Tensor input2d = input_for(rank, n, at::kHalf, 3).view({5, 4}).t().contiguous().t();   // logical (5,4)
    ASSERT_FALSE(input2d.is_contiguous());
    at::Tensor storage = at::full({2 * mine.numel}, 42, at::kHalf);
    at::Tensor strided = storage.slice(0, 0, 2 * mine.numel, 2);
    ASSERT_FALSE(strided.is_contiguous());
    comm.reduce_scatter(input2d, strided, ReduceOp::kSum).wait();
    expect_same(strided, reference(ws, n, at::kHalf, 3, ReduceOp::kSum).narrow(0, mine.offset, mine.numel),
                "strided reduce_scatter");
    expect_same(storage.slice(0, 1, 2 * mine.numel, 2), at::full({mine.numel}, 42, at::kHalf),
                "strided reduce_scatter wrote between the strides");

    // all_gather into a transposed 2-D output.
    at::Tensor out = at::full({4, 5}, 42, at::kBFloat16).t();   // logical (5,4)
    std::vector<at::Tensor> parts;
    for (int r = 0; r < ws; ++r) {
      const ChunkRange c = chunk_range(n, ws, r);
      parts.push_back(input_for(r, n, at::kBFloat16, 4).narrow(0, c.offset, c.numel));
    }
    comm.all_gather(parts[rank].clone(), out).wait();
    expect_same(out, at::cat(parts).view({5, 4}), "all_gather into a transposed output");

    // broadcast into a transposed tensor.
    at::Tensor b = input_for(rank, 6, at::kDouble, 5).view({2, 3}).t();
    comm.broadcast(b, 1).wait();
    expect_same(b, input_for(1, 6, at::kDouble, 5).view({2, 3}).t(), "transposed broadcast");

    // In place, as ZeRO does it: all_gather whose input is this rank's chunk of the output,
    // and reduce_scatter whose output is this rank's chunk of the input; even (18) and uneven (20).
    for (const int64_t numel : {int64_t{18}, int64_t{20}}) {
      const std::string what = std::to_string(numel) + " elements, rank " + std::to_string(rank);
      const ChunkRange c = chunk_range(numel, ws, rank);
      at::Tensor full = at::full({numel}, 42, at::kFloat);
      full.narrow(0, c.offset, c.numel).copy_(input_for(rank, numel, at::kFloat, 6).narrow(0, c.offset, c.numel));
      comm.all_gather(full.narrow(0, c.offset, c.numel), full).wait();
      std::vector<at::Tensor> chunks;
      for (int r = 0; r < ws; ++r) {
        const ChunkRange rc = chunk_range(numel, ws, r);
        chunks.push_back(input_for(r, numel, at::kFloat, 6).narrow(0, rc.offset, rc.numel));
      }
      expect_same(full, at::cat(chunks), "in-place all_gather, " + what);

      at::Tensor bucket = input_for(rank, numel, at::kFloat, 7);
      comm.reduce_scatter(bucket, bucket.narrow(0, c.offset, c.numel), ReduceOp::kAvg).wait();
      expect_same(bucket.narrow(0, c.offset, c.numel),
                  reference(ws, numel, at::kFloat, 7, ReduceOp::kAvg).narrow(0, c.offset, c.numel),
                  "in-place reduce_scatter, " + what);
    }
    EXPECT_EQ(comm.issued(), 5 + 4);
  });
}

TEST(ThreadComm, EmptyTensorsAndLongSequences) {
  const int ws = 4;
  auto world = Communicator::make_thread_world(ws, options_with());
  run_world(world, [&](Communicator& comm, int rank) {
    // Empty tensors are collectives too (they keep their sequence number) but move nothing.
    at::Tensor empty = at::empty({0}, at::kFloat);
    comm.all_reduce(empty).wait();
    comm.reduce_scatter(empty, at::empty({0}, at::kFloat)).wait();
    comm.all_gather(at::empty({0}, at::kFloat), empty).wait();
    comm.broadcast(empty, 2).wait();
    comm.all_reduce_coalesced({}).wait();   // no tensors, no bucket
    EXPECT_EQ(comm.issued(), 4);

    // Many small collectives in a row stay aligned across ranks.
    for (int i = 0; i < 200; ++i) {
      at::Tensor t = input_for(rank, 3, at::kLong, i);
      if (i % 2 == 0) {
        comm.all_reduce(t, ReduceOp::kSum).wait();
        expect_same(t, reference(ws, 3, at::kLong, i, ReduceOp::kSum), "all_reduce #" + std::to_string(5 + i));
      } else {
        comm.broadcast(t, i % ws).wait();
        expect_same(t, input_for(i % ws, 3, at::kLong, i), "broadcast #" + std::to_string(5 + i));
      }
    }
    EXPECT_EQ(comm.issued(), 204);
  });
}

TEST(ThreadComm, WorkHandles) {
  const int ws = 2;
  auto world = Communicator::make_thread_world(ws, options_with());
  run_world(world, [&](Communicator& comm, int rank) {
    // Two works waited together, in the other order.
    at::Tensor a = input_for(rank, 5, at::kFloat, 7);
    at::Tensor b = input_for(rank, 6, at::kDouble, 8);
    Work wa = comm.all_reduce(a);
    Work wb = comm.all_reduce(b, ReduceOp::kMax);
    wait_all({&wb, &wa});
    expect_same(a, reference(ws, 5, at::kFloat, 7, ReduceOp::kSum), "first of two");
    expect_same(b, reference(ws, 6, at::kDouble, 8, ReduceOp::kMax), "second of two");

    // The threads backend completes while issuing: a zero timeout is enough.
    at::Tensor t = at::full({3}, rank + 1, at::kFloat);
    Work work = comm.all_reduce(t);
    work.wait(0ms);
    EXPECT_TRUE(work.is_completed());
    expect_same(t, at::full({3}, 3, at::kFloat), "all_reduce waited with a zero timeout");
  });
  Work nothing;   // already complete
  EXPECT_TRUE(nothing.is_completed());
  nothing.wait();
  nothing.wait(0ms);
}

TEST(ThreadComm, BarrierWaitsForEveryRank) {
  const int ws = 4;
  std::atomic<int> arrived{0};
  auto world = Communicator::make_thread_world(ws, options_with());
  run_world(world, [&](Communicator& comm, int rank) {
    for (int round = 1; round <= 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((rank + round) % ws)));
      arrived.fetch_add(1);
      comm.barrier().wait();
      EXPECT_GE(arrived.load(), round * ws) << "rank " << rank << " left barrier " << round << " early";
      comm.barrier().wait();   // nobody starts the next round before everyone checked
    }
    EXPECT_EQ(comm.issued(), 6);
  });
}

// ---------------------------------------------------------------- a world of one

TEST(ThreadComm, WorldOfOneIsTheIdentity) {
  auto world = Communicator::make_thread_world(1);
  ASSERT_EQ(world.size(), 1u);
  Communicator& comm = world[0];
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  EXPECT_EQ(comm.backend(), BackendKind::kThreads);
  // The threads backend reduces and averages every dtype itself; only uneven chunks are padded.
  const std::vector<std::string> composed = comm.composed_paths();
  ASSERT_EQ(composed.size(), 1u);
  EXPECT_TRUE(contains(composed[0], "pad")) << composed[0];
  int64_t issued = 0;
  for (at::ScalarType dtype : {at::kHalf, at::kLong, at::kFloat}) {
    const std::string what = c10::toString(dtype);
    for (ReduceOp op : kOps) {
      at::Tensor t = input_for(0, 7, dtype, 1);
      comm.all_reduce(t, op).wait();
      expect_same(t, input_for(0, 7, dtype, 1), what + " all_reduce " + name_of(op));
      at::Tensor out = at::full({7}, 42, dtype);
      comm.reduce_scatter(input_for(0, 7, dtype, 2), out, op).wait();
      expect_same(out, input_for(0, 7, dtype, 2), what + " reduce_scatter " + name_of(op));
    }
    at::Tensor gathered = at::full({7}, 42, dtype);
    comm.all_gather(input_for(0, 7, dtype, 3), gathered).wait();
    expect_same(gathered, input_for(0, 7, dtype, 3), what + " all_gather");
    at::Tensor b = input_for(0, 7, dtype, 4);
    comm.broadcast(b, 0).wait();
    expect_same(b, input_for(0, 7, dtype, 4), what + " broadcast");
    comm.barrier().wait();
    issued += 2 * 3 + 3;
    EXPECT_EQ(comm.issued(), issued) << what;
  }
  std::vector<at::Tensor> tensors = {input_for(0, 3, at::kFloat, 5), input_for(0, 4, at::kLong, 6).view({2, 2})};
  comm.all_reduce_coalesced(tensors, ReduceOp::kAvg).wait();
  expect_same(tensors[0], input_for(0, 3, at::kFloat, 5), "all_reduce_coalesced float");
  expect_same(tensors[1], input_for(0, 4, at::kLong, 6).view({2, 2}), "all_reduce_coalesced long");
  std::vector<at::Tensor> outs = {at::full({3}, 42, at::kFloat), at::full({9}, 42, at::kFloat)};
  comm.reduce_scatter_coalesced({input_for(0, 3, at::kFloat, 7), input_for(0, 9, at::kFloat, 8)}, outs).wait();
  expect_same(outs[0], input_for(0, 3, at::kFloat, 7), "reduce_scatter_coalesced 0");
  expect_same(outs[1], input_for(0, 9, at::kFloat, 8), "reduce_scatter_coalesced 1");
  std::vector<at::Tensor> gathered = {at::full({3}, 42, at::kFloat), at::full({3, 3}, 42, at::kFloat)};
  comm.all_gather_coalesced({input_for(0, 3, at::kFloat, 9), input_for(0, 9, at::kFloat, 10)}, gathered).wait();
  expect_same(gathered[0], input_for(0, 3, at::kFloat, 9), "all_gather_coalesced 0");
  expect_same(gathered[1], input_for(0, 9, at::kFloat, 10).view({3, 3}), "all_gather_coalesced 1");
}
}  // namespace
}  // namespace zerotrain::comm
