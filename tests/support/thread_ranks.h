// Ranks as threads of one process, for the engine tests (the in-process backend).
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/comm/communicator.h"

namespace zerotrain::test {

// Runs fn(rank, communicator) on world_size threads; returns each rank's error ("" if none).
inline std::vector<std::string> run_ranks(int world_size, const std::function<void(int, comm::Communicator&)>& fn) {
  auto world = comm::Communicator::make_thread_world(world_size);
  std::vector<std::string> errors(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, world[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace zerotrain::test
