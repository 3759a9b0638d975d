#include <gtest/gtest.h>

#include "zerotrain/core/error.h"
#include "zerotrain/partition/layout.h"

namespace zp = zerotrain::partition;

TEST(GroupLayout, BucketsInReverseOrderWithTheCap) {
  // Reverse order with a cap of 9: p4 (2); p3 (10) does not fit and gets a bucket of its
  // own although larger than the cap; p2 (3) + p1 (6) = 9 fit; p0 (4) starts the last.
  zp::GroupLayout l({4, 6, 3, 10, 2}, /*bucket_numel=*/9, /*world_size=*/2, /*rank=*/0);
  EXPECT_EQ(l.numel(), 25);
  ASSERT_EQ(l.buckets().size(), 4u);
  EXPECT_EQ(l.buckets()[0].params, (std::vector<size_t>{4}));
  EXPECT_EQ(l.buckets()[1].params, (std::vector<size_t>{3}));
  EXPECT_EQ(l.buckets()[2].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(l.buckets()[3].params, (std::vector<size_t>{0}));
  EXPECT_EQ(l.buckets()[2].flat.offset, 4);
  EXPECT_EQ(l.buckets()[2].flat.numel, 9);
  // Rank 0 owns the first ceil(9/2) = 5 elements of that bucket.
  EXPECT_EQ(l.buckets()[2].chunk.offset, 0);
  EXPECT_EQ(l.buckets()[2].chunk.numel, 5);
  EXPECT_EQ(l.shard_numel(), 1 + 5 + 5 + 2);
}

TEST(GroupLayout, EveryElementBelongsToExactlyOneRank) {
  const std::vector<int64_t> numels{5, 1, 17, 3, 8, 2};
  for (int ws : {1, 2, 3, 4}) {
    std::vector<int> owners(36, 0);
    int64_t total_shard = 0;
    for (int r = 0; r < ws; ++r) {
      zp::GroupLayout l(numels, 9, ws, r);
      int64_t covered = 0;
      for (const auto& b : l.buckets()) {
        EXPECT_EQ(b.shard_offset, covered);
        for (int64_t i = 0; i < b.chunk.numel; ++i) owners[b.flat.offset + b.chunk.offset + i]++;
        covered += b.chunk.numel;
      }
      EXPECT_EQ(covered, l.shard_numel());
      total_shard += l.shard_numel();
      int64_t from_pieces = 0;
      for (const auto& piece : l.shard_pieces()) {
        EXPECT_LE(piece.in_param.end(), numels[piece.param]);
        from_pieces += piece.in_param.numel;
      }
      EXPECT_EQ(from_pieces, l.shard_numel());
    }
    EXPECT_EQ(total_shard, 36);
    for (int o : owners) EXPECT_EQ(o, 1) << "world size " << ws;
  }
}

TEST(GroupLayout, BucketsAreContiguousRangesOfTheFlatBuffer) {
  zp::GroupLayout l({4, 6, 3, 10, 2}, 9, 2, 1);
  int64_t next_end = l.numel();
  for (const auto& b : l.buckets()) {
    EXPECT_EQ(b.flat.end(), next_end);
    next_end = b.flat.offset;
    for (size_t p : b.params) EXPECT_EQ(l.bucket_of(p), static_cast<size_t>(&b - l.buckets().data()));
  }
  EXPECT_EQ(next_end, 0);
  EXPECT_THROW(zp::GroupLayout({1}, 0, 1, 0), zerotrain::ConfigError);
}
