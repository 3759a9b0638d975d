#include "zerotrain/checkpoint/fragments.h"

#include <algorithm>

#include "zerotrain/comm/types.h"

namespace zerotrain::checkpoint {
namespace {

// The parts of the parameters inside flat elements [begin, end), in flat order; `local` maps
// a flat element to its place in the stepped weights.
template <class Local>
void pieces_in(const partition::GroupLayout& layout, int64_t begin, int64_t end, Local local,
               std::vector<HeldPiece>& out) {
  for (std::size_t i = 0; i < layout.num_params(); ++i) {
    const partition::Range& p = layout.param(i);
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.end());
    if (lo >= hi) continue;
    out.push_back({i, {lo - p.offset, hi - lo}, local(lo)});
  }
}

std::vector<HeldPiece> shard_pieces(const partition::GroupLayout& layout, int world_size, int rank) {
  std::vector<HeldPiece> out;
  int64_t shard_offset = 0;
  for (const partition::Bucket& b : layout.buckets()) {
    const comm::ChunkRange c = comm::chunk_range(b.flat.numel, world_size, rank);
    const int64_t begin = b.flat.offset + c.offset;
    pieces_in(layout, begin, begin + c.numel, [&](int64_t flat) { return shard_offset + (flat - begin); }, out);
    shard_offset += c.numel;
  }
  return out;
}

}  // namespace

std::vector<HeldPiece> held_pieces(const partition::GroupLayout& layout, bool sharded, int world_size, int rank) {
  if (sharded) return shard_pieces(layout, world_size, rank);
  std::vector<HeldPiece> out;
  pieces_in(layout, 0, layout.numel(), [](int64_t flat) { return flat; }, out);
  return out;
}

std::vector<HeldPiece> saved_pieces(const partition::GroupLayout& layout, bool sharded, int world_size, int rank) {
  if (sharded) return shard_pieces(layout, world_size, rank);
  const comm::ChunkRange c = comm::chunk_range(layout.numel(), world_size, rank);
  std::vector<HeldPiece> out;
  pieces_in(layout, c.offset, c.offset + c.numel, [](int64_t flat) { return flat; }, out);
  return out;
}

}  // namespace zerotrain::checkpoint
