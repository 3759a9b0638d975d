// Models for the ZeRO stage 3 tests. Each wraps its units in zerotrain::Sharded, which
// passes through without an engine, so plain LibTorch training of the same module is the
// oracle.
#pragma once

#include <torch/torch.h>

#include "tests/support/parity_model.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::test {

// ParityNet with each Linear a unit: the same initial weights (the same draws in the same
// order), so parity_reference is its oracle too.
struct ShardedParityNetImpl : torch::nn::Module {
  ShardedParityNetImpl() {
    torch::nn::Linear l1(8, 16), l2(16, 4), l3(2, 2);
    fc1 = register_module("fc1", zerotrain::Sharded<torch::nn::Linear>(l1));
    fc2 = register_module("fc2", zerotrain::Sharded<torch::nn::Linear>(l2));
    unused = register_module("unused", zerotrain::Sharded<torch::nn::Linear>(l3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  zerotrain::Sharded<torch::nn::Linear> fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};
TORCH_MODULE(ShardedParityNet);

inline ShardedParityNet make_sharded_parity_net(bool freeze_fc1_bias) {
  torch::manual_seed(42);
  ShardedParityNet net;
  if (freeze_fc1_bias) net->fc1->inner->bias.set_requires_grad(false);
  return net;
}

// A linear layer whose weight is another module's (a head tied to its embedding).
struct TiedLinearImpl : torch::nn::Module {
  explicit TiedLinearImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedLinear);

// Shared and reused parameters: `embed` (8 -> 8) and `head` share one weight, `block` runs
// twice per forward, `act` is a unit without parameters, and `branch` runs only when the
// forward is asked to (a data-dependent branch).
struct SharingNetImpl : torch::nn::Module {
  SharingNetImpl() {
    torch::nn::Linear e(torch::nn::LinearOptions(8, 8).bias(false));
    embed = register_module("embed", zerotrain::Sharded<torch::nn::Linear>(e));
    block = register_module("block", zerotrain::Sharded<torch::nn::Linear>(torch::nn::Linear(8, 8)));
    act = register_module("act", zerotrain::Sharded<torch::nn::Tanh>(torch::nn::Tanh()));
    branch = register_module("branch", zerotrain::Sharded<torch::nn::Linear>(torch::nn::Linear(8, 8)));
    head = register_module("head", zerotrain::Sharded<TiedLinear>(TiedLinear(e->weight)));
  }
  torch::Tensor forward(const torch::Tensor& x, bool take_branch) {
    auto h = act(block(act(block(embed(x)))));
    if (take_branch) h = h + branch(h);
    return head(h);
  }
  zerotrain::Sharded<torch::nn::Linear> embed{nullptr}, block{nullptr}, branch{nullptr};
  zerotrain::Sharded<torch::nn::Tanh> act{nullptr};
  zerotrain::Sharded<TiedLinear> head{nullptr};
};
TORCH_MODULE(SharingNet);

}  // namespace zerotrain::test
