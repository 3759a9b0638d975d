// Which elements of which parameters a rank writes into its checkpoint file, and which it
// holds when loading, from a parameter group's layout (partition/layout.h). Any rank's
// pieces can be computed on any rank: the manifest lists every rank's without a collective.
// No LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zerotrain/partition/layout.h"

namespace zerotrain::checkpoint {

// Elements `in_param` of parameter `param`, at `local_offset` in the rank's stepped weights
// (its shard when sharded, the whole flat buffer otherwise).
struct HeldPiece {
  std::size_t param = 0;
  partition::Range in_param;
  int64_t local_offset = 0;
};

// What rank `rank` of `world_size` holds: its chunk of every bucket when the optimizer is
// sharded (stages 1-3), every parameter whole otherwise (stage 0).
std::vector<HeldPiece> held_pieces(const partition::GroupLayout& layout, bool sharded, int world_size, int rank);
// What it writes: what it holds when sharded; at stage 0, where every rank holds everything,
// its equal chunk of the flat buffer, so that all ranks share the writing.
std::vector<HeldPiece> saved_pieces(const partition::GroupLayout& layout, bool sharded, int world_size, int rank);

}  // namespace zerotrain::checkpoint
