// Where every trainable parameter of a parameter group lives in its flat buffer, how the
// buffer is cut into gradient buckets, and which chunk of each bucket a rank owns.
// No LibTorch: numbers only, so the shard math is unit-tested on its own.
//
//   flat buffer:  p0 | p1 | p2 | p3 | p4            (parameters in model order)
//   buckets:      [ bucket 1  ][    bucket 0    ]    (filled in reverse order: the order
//                                                    in which backward produces gradients)
//   rank r owns comm::chunk_range(bucket numel, world_size, r) of every bucket; its
//   shard (master weights, optimizer state, stage-2 gradients) is those chunks, bucket 0
//   first, back to back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zerotrain::partition {

struct Range {
  int64_t offset = 0;
  int64_t numel = 0;
  int64_t end() const { return offset + numel; }
};

struct Bucket {
  Range flat;                  // its elements in the group's flat buffer
  std::vector<std::size_t> params;  // indices of the parameters in it
  Range chunk;                 // this rank's chunk, relative to flat.offset
  int64_t shard_offset = 0;    // where that chunk sits in this rank's shard
};

class GroupLayout {
 public:
  // `param_numels` in model order; buckets hold at most `bucket_numel` elements unless a
  // single parameter is larger (it gets a bucket of its own), as in DeepSpeed.
  GroupLayout(std::vector<int64_t> param_numels, int64_t bucket_numel, int world_size, int rank);
  // Buckets given explicitly (ZeRO-3's units): `bucket_params[k]` lists the parameters of
  // bucket k, a contiguous run of indices; every parameter is in exactly one bucket.
  GroupLayout(std::vector<int64_t> param_numels, const std::vector<std::vector<std::size_t>>& bucket_params,
              int world_size, int rank);
  GroupLayout() = default;   // no parameters

  int64_t numel() const { return numel_; }           // the flat buffer
  int64_t shard_numel() const { return shard_numel_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const Range& param(std::size_t index) const { return params_[index]; }
  std::size_t num_params() const { return params_.size(); }
  std::size_t bucket_of(std::size_t param) const { return bucket_of_[param]; }

  // The parts of the parameters that fall into this rank's shard, in shard order, as
  // (param index, range within the param, offset in the shard): for per-parameter math on
  // a shard (Lamb's trust ratio, norms by parameter).
  struct Piece {
    std::size_t param;
    Range in_param;
    int64_t shard_offset;
  };
  std::vector<Piece> shard_pieces() const;

 private:
  void place_params(const std::vector<int64_t>& param_numels);
  void assign_chunks(int world_size, int rank);

  std::vector<Range> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
};

}  // namespace zerotrain::partition
