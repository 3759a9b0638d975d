// Holds every write of a checkpoint's rank files (checkpoint::set_write_observer) until the
// gate opens: an asynchronous save's background writers then write while the training
// threads go on, which is what the tests of its snapshot need. One gate at a time per
// process; the destructor opens it and removes the observer, so destroy it only once every
// save it held has finished (its writers joined).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>

#include "zerotrain/checkpoint/file_io.h"

namespace zerotrain::test {

class WriteGate {
 public:
  WriteGate() {
    checkpoint::set_write_observer([this](const std::filesystem::path& path, int64_t) {
      if (path.filename().string().rfind("rank_", 0) != 0) return;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return open_; });
    });
  }
  ~WriteGate() {
    open();
    checkpoint::set_write_observer(nullptr);
  }
  WriteGate(const WriteGate&) = delete;
  WriteGate& operator=(const WriteGate&) = delete;

  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace zerotrain::test
