// Names inside a checkpoint that its other readers meet too (the Python package, HF's
// checkpoint-N folders): one definition each, exported to Python by zerotrain._C.
#pragma once

namespace zerotrain::checkpoint {

// A tag saved without a name: "global_step<N>", N the optimizer steps taken (DeepSpeed's).
inline constexpr const char* kDefaultTagPrefix = "global_step";

// client_state keys the Python package writes beside the script's own, and takes out again
// on load: the names under which a tied parameter also appears in the model's state_dict
// (zero_to_fp32 adds them back, as DeepSpeed's "shared_params"), and the state of a client
// torch LR schedule (DeepSpeed saves it too), so a resumed run continues the schedule.
inline constexpr const char* kSharedParamsKey = "__zerotrain_shared_params__";
inline constexpr const char* kLrSchedulerKey = "__zerotrain_lr_scheduler__";

}  // namespace zerotrain::checkpoint
