// A job that checkpoints the parity model (ZeRO stage 2) under `zerotrain launch`, for
// tests/mp/checkpoint_fault_test.sh: a rank killed in the middle of a save.
//
//   checkpoint_fault_rank DIR kill-in-second-save
//       trains 2 steps and saves DIR/global_step2; trains 2 more and saves DIR/global_step4,
//       where rank 1 kills itself with SIGKILL right after its first write of its rank file
//       (checkpoint::set_write_observer), having printed "rank 1 dies writing PATH".
//   checkpoint_fault_rank DIR kill-in-second-async-save
//       the same with checkpoint.async_save: rank 1's background writer dies, while the
//       training thread of every rank goes on to step 6 (rank 0 then waits on rank 1).
//   checkpoint_fault_rank DIR resume
//       loads the tag DIR/latest names, prints "loaded global_steps=N", trains to step 4 and
//       saves DIR/global_step4 (printing "saved global_step4").
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/support/parity_model.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/engine.h"

using namespace zerotrain::test;

namespace {

constexpr int kVictim = 1;

void train_to(zerotrain::Engine& engine, ParityNet& net, const ParityData& data, const ParityCase& c, int rank,
              int64_t last_step) {
  while (engine.global_steps() < last_step) {
    const auto step = engine.global_steps();
    engine.backward(torch::mse_loss(net->forward(rank_rows(data.x[step], c, rank, 0)), rank_rows(data.y[step], c, rank, 0)));
    engine.step();
  }
}

// From the second save on, rank kVictim dies right after the first write of its own file.
void arm_victim(int rank) {
  if (rank != kVictim) return;
  const std::string mine = zerotrain::checkpoint::rank_file_name(kVictim);
  zerotrain::checkpoint::set_write_observer([mine](const std::filesystem::path& path, int64_t bytes) {
    if (path.filename() != mine) return;
    std::cout << "rank " << kVictim << " dies writing " << path.string() << " after " << bytes << " bytes" << std::endl;
    ::raise(SIGKILL);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: checkpoint_fault_rank DIR kill-in-second-save|resume" << std::endl;
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  try {
    auto comm = zerotrain::comm::Communicator::init();
    const ParityCase c{2, comm.world_size(), 1};
    ParityNet net = make_parity_net(false);
    const bool async = mode == "kill-in-second-async-save";
    zerotrain::Config config = parity_config(c);
    config.checkpoint.async_save = async;
    auto engine = zerotrain::initialize(net.ptr(), config, {.comm = comm});
    const ParityData data = make_parity_data();
    if (mode == "kill-in-second-save" || async) {
      train_to(engine, net, data, c, comm.rank(), 2);
      engine.save_checkpoint(dir);
      train_to(engine, net, data, c, comm.rank(), 4);
      // The first save published before the victim is armed: its background write may still
      // be running at step 4, and it is the second save's write that must die.
      if (async) engine.wait_for_checkpoint();
      arm_victim(comm.rank());
      engine.save_checkpoint(dir);
      if (async) {
        train_to(engine, net, data, c, comm.rank(), 6);
        engine.wait_for_checkpoint();
      }
      std::cerr << "rank " << comm.rank() << ": the second save finished, but rank " << kVictim
                << " should have died in it" << std::endl;
      return 1;
    }
    if (mode == "resume") {
      ZT_CHECK(engine.load_checkpoint(dir).has_value(), zerotrain::CheckpointError, dir, ": nothing was loaded");
      if (comm.rank() == 0) std::cout << "loaded global_steps=" << engine.global_steps() << std::endl;
      train_to(engine, net, data, c, comm.rank(), 4);
      engine.save_checkpoint(dir);
      if (comm.rank() == 0) std::cout << "saved global_step" << engine.global_steps() << std::endl;
      return 0;
    }
    std::cerr << "unknown mode " << mode << std::endl;
    return 2;
  } catch (const zerotrain::Error& e) {
    std::cerr << e.what() << std::endl;
    return e.exit_code();
  }
}
