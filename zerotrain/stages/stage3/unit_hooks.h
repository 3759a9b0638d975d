// What a zerotrain::Sharded unit calls into while the engine runs ZeRO stage 3. No LibTorch.
#pragma once

namespace zerotrain::stages::stage3 {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // Before the unit's forward: its parameters (and those it shares with other units) gathered.
  virtual void pre_forward(int unit) = 0;
  // After it: released, unless another forward in progress or persistence keeps them.
  virtual void post_forward(int unit) = 0;
  // Backward reached the unit's outputs: gathered again for its backward.
  virtual void pre_backward(int unit) = 0;
};

}  // namespace zerotrain::stages::stage3
