// One rank's side of the parity oracle (parity_model.h): the parity steps through an engine,
// with the global gradient norm it reports at each step's boundary, for the in-process and
// multi-process engine tests alike.
#pragma once

#include <torch/torch.h>

#include <limits>
#include <vector>

#include "tests/support/parity_model.h"
#include "zerotrain/engine/engine.h"

namespace zerotrain::test {

// Trains steps [first, last) of the parity data on rank `rank` (each step: c.accumulation
// micro-batches, then the boundary). Returns each step's get_global_grad_norm(); NaN where the
// engine reports none (a skipped fp16 step), which no reference norm matches.
template <class Net>
std::vector<double> train_parity_steps(Engine& engine, Net& net, const ParityData& data, const ParityCase& c, int rank,
                                       int first = 0, int last = kSteps) {
  std::vector<double> norms;
  for (int s = first; s < last; ++s) {
    for (int k = 0; k < c.accumulation; ++k) {
      auto x = rank_rows(data.x[s], c, rank, k), y = rank_rows(data.y[s], c, rank, k);
      engine.backward(torch::mse_loss(net->forward(x.to(engine.model_dtype())).to(torch::kFloat), y));
      engine.step();
    }
    norms.push_back(engine.get_global_grad_norm().value_or(std::numeric_limits<double>::quiet_NaN()));
  }
  return norms;
}

}  // namespace zerotrain::test
