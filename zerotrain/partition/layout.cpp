#include "zerotrain/partition/layout.h"

#include <algorithm>

#include "zerotrain/comm/types.h"
#include "zerotrain/core/error.h"

namespace zerotrain::partition {

void GroupLayout::place_params(const std::vector<int64_t>& param_numels) {
  for (int64_t n : param_numels) {
    params_.push_back({numel_, n});
    numel_ += n;
  }
  bucket_of_.resize(params_.size());
}

void GroupLayout::assign_chunks(int world_size, int rank) {
  for (Bucket& b : buckets_) {
    const comm::ChunkRange c = comm::chunk_range(b.flat.numel, world_size, rank);
    b.chunk = {c.offset, c.numel};
    b.shard_offset = shard_numel_;
    shard_numel_ += c.numel;
  }
}

GroupLayout::GroupLayout(std::vector<int64_t> param_numels, const std::vector<std::vector<std::size_t>>& bucket_params,
                         int world_size, int rank) {
  place_params(param_numels);
  std::vector<bool> placed(params_.size(), false);
  for (const auto& members : bucket_params) {
    ZT_INTERNAL_ASSERT(!members.empty(), "an empty bucket");
    Bucket b{{params_[members.front()].offset, 0}, {}, {}, 0};
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t i = members[k];
      ZT_INTERNAL_ASSERT(i < params_.size() && !placed[i], "a parameter in no bucket or in two");
      ZT_INTERNAL_ASSERT(k == 0 || i == members[k - 1] + 1, "a bucket's parameters must be contiguous");
      placed[i] = true;
      b.flat.numel += params_[i].numel;
      bucket_of_[i] = buckets_.size();
    }
    // Stored last first, as the size-cut buckets store theirs.
    b.params.assign(members.rbegin(), members.rend());
    buckets_.push_back(std::move(b));
  }
  for (bool p : placed) ZT_INTERNAL_ASSERT(p, "a parameter in no bucket");
  assign_chunks(world_size, rank);
}

GroupLayout::GroupLayout(std::vector<int64_t> param_numels, int64_t bucket_numel, int world_size, int rank) {
  ZT_CHECK(bucket_numel > 0, ConfigError, "the gradient bucket size must be positive, got ", bucket_numel);
  place_params(param_numels);
  // Reverse order: the last parameters' gradients are ready first.
  for (size_t k = params_.size(); k-- > 0;) {
    const int64_t n = params_[k].numel;
    if (buckets_.empty() || (buckets_.back().flat.numel > 0 && buckets_.back().flat.numel + n > bucket_numel)) {
      buckets_.push_back({{params_[k].end(), 0}, {}, {}, 0});
    }
    Bucket& b = buckets_.back();
    b.flat.offset = params_[k].offset;
    b.flat.numel += n;
    b.params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
  }
  assign_chunks(world_size, rank);
}

std::vector<GroupLayout::Piece> GroupLayout::shard_pieces() const {
  std::vector<Piece> pieces;
  for (const Bucket& b : buckets_) {
    const int64_t begin = b.flat.offset + b.chunk.offset, end = begin + b.chunk.numel;
    // Parameters of a bucket are stored in reverse; walk them in flat order.
    for (auto it = b.params.rbegin(); it != b.params.rend(); ++it) {
      const Range& p = params_[*it];
      const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.end());
      if (lo >= hi) continue;
      pieces.push_back({*it, {lo - p.offset, hi - lo}, b.shard_offset + (lo - begin)});
    }
  }
  return pieces;
}

}  // namespace zerotrain::partition
