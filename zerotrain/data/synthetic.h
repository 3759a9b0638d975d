// Deterministic synthetic datasets with structure a model can learn, so the loss visibly
// falls: sample i is a pure function of (seed, i), whatever the world size.
//   mlp: x ~ N(0, 1)^n_in, y = tanh(x W) for a fixed random teacher W;
//   gpt: token sequences t[k+1] = (a * t[k] + c) mod vocab, with a and c fixed by the seed
//        and the start token by the sample: the next token is predictable from the last.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "zerotrain/data/batch.h"

namespace zerotrain::data {

class SyntheticDataset {
 public:
  // model: "mlp" or "gpt"; `dims`: (n_in, n_out) for mlp, (vocab_size, block_size) for gpt.
  SyntheticDataset(std::string model, int64_t dim0, int64_t dim1, uint64_t seed);
  // Samples [first, first + count).
  Batch batch(int64_t first, int64_t count) const;

 private:
  std::string model_;
  int64_t dim0_, dim1_;
  uint64_t seed_;
  at::Tensor teacher_;   // (n_in, n_out) fp32, mlp only
};

}  // namespace zerotrain::data
