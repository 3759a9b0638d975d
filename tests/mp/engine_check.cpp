// The parity oracle across real processes: under `zerotrain launch`, every rank trains the
// parity model with ZeRO stages 0, 1 and 2 (accumulation 2, one bucket per tensor) over the
// launched backend, computes plain single-process training itself, and compares. Exits 0
// when every stage matched on every rank.
#include <iostream>

#include "tests/support/parity_model.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

using namespace zerotrain::test;

int main() {
  try {
    auto comm = zerotrain::comm::Communicator::init();
    const ParityData data = make_parity_data();
    int failures = 0;
    for (int stage : {0, 1, 2}) {
      const ParityCase c{stage, comm.world_size(), 2};
      ParityNet net = make_parity_net(false);
      auto engine = zerotrain::initialize(net.ptr(), parity_config(c), {.comm = comm});
      for (int s = 0; s < kSteps; ++s) {
        for (int k = 0; k < c.accumulation; ++k) {
          engine.backward(torch::mse_loss(net->forward(rank_rows(data.x[s], c, comm.rank(), k)),
                                          rank_rows(data.y[s], c, comm.rank(), k)));
          engine.step();
        }
      }
      std::vector<torch::Tensor> got;
      for (auto& p : net->parameters()) got.push_back(p.detach().clone());
      const double diff = max_difference(got, parity_reference(c, data));
      if (!(diff <= kParityTolerance)) {
        ++failures;
        std::cerr << "stage " << stage << ": parameters differ from single-process training by " << diff << std::endl;
      }
    }
    auto all = torch::full({1}, failures, torch::kLong);
    comm.all_reduce(all).wait();
    if (comm.rank() == 0) {
      std::cout << "engine_check: " << zerotrain::comm::to_string(comm.backend()) << " world " << comm.world_size()
                << ": stages 0, 1, 2 " << (all.item<int64_t>() == 0 ? "match" : "DIFFER") << std::endl;
    }
    return all.item<int64_t>() == 0 ? 0 : 1;
  } catch (const zerotrain::Error& e) {
    std::cerr << "engine_check: " << e.what() << std::endl;
    return e.exit_code();
  }
}
