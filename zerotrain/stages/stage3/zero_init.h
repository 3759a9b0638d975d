// zerotrain::ZeroInit: DeepSpeed's zero.Init. While one is alive in a thread, each
// zerotrain::Sharded unit built in that thread keeps only this rank's 1/N of its parameters
// as soon as it is built, so a model larger than one rank's memory is never whole anywhere:
// at most one unit is, while it is being built.
//
//   auto config = zerotrain::Config::from_file("ds_config.json");       // stage 3
//   std::shared_ptr<Gpt> model;
//   { zerotrain::ZeroInit zero_init(config); model = std::make_shared<Gpt>(options); }
//   auto engine = zerotrain::initialize(model, config);
//
// Every rank builds the model in the same order (the units' parameters are broadcast from
// rank 0, so rank 0's initial values are everyone's, as the engine's start-up broadcast
// gives without ZeroInit; a loader of pretrained weights gives each rank its chunks from the
// files instead: ChunkSourceScope, preshard.h). Parameters are cast to the config's training
// dtype when cut. A unit that is built whole and wrapped afterwards (wrap_sequential) is cut
// too, but was whole first. Until initialize, the units cannot run. docs/stage3.md.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <optional>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"

namespace zerotrain {

class ZeroInit {
 public:
  // `config` must ask for ZeRO stage 3 (it gives the training dtype too). `comm`: the ranks
  // to cut for; unset, it joins the job as initialize would (the config's "comm" block and
  // the launcher's environment), and initialize then uses the same communicator. `device`:
  // where the kept 1/N goes (DeepSpeed's zero.Init puts it on the rank's accelerator); unset,
  // it stays where the unit built it. A unit built on the CPU and cut onto a GPU is never
  // whole on the GPU.
  explicit ZeroInit(const Config& config, std::optional<comm::Communicator> comm = std::nullopt,
                    std::optional<c10::Device> device = std::nullopt);
  ~ZeroInit();
  ZeroInit(const ZeroInit&) = delete;
  ZeroInit& operator=(const ZeroInit&) = delete;

  const comm::Communicator& comm() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
  State* previous_ = nullptr;   // an enclosing ZeroInit of this thread
};

}  // namespace zerotrain
