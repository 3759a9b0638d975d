// A checkpoint save whose files are written in the background (checkpoint.async_save,
// docs/checkpoints.md "Asynchronous saves"). The training thread runs the collective phases
// of the transaction (save_transaction.h) up to the room check, copies the live state it
// saves (a snapshot), and goes on training while a background thread writes this rank's
// file. Publishing is collective again, so it happens where every rank calls finish(): the
// engine polls at each optimizer step and waits before the next save, a load, or the end.
// `latest` moves only once every rank's file is durable; a process killed before that leaves
// the staging directory and the previous `latest`.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/protocol/provider.h"
#include "zerotrain/checkpoint/protocol/save.h"
#include "zerotrain/comm/communicator.h"

namespace zerotrain::checkpoint {

class SaveTransaction;

// The host memory a snapshot may take: the fraction of what is available that the background
// save leaves unused is headroom for training (its activations and allocator slack).
inline constexpr double kSnapshotShareOfAvailable = 0.8;

class AsyncSave {
 public:
  // Phases (1)–(2) of the save, then the snapshot and the background write. When the
  // snapshot would not fit in any rank's available memory, the save is synchronous instead
  // (every rank alike; rank 0 logs why) and nullptr is returned. `reuse`: the buffers of the
  // previous snapshot, taken over when their sizes match, and given this one's.
  static std::unique_ptr<AsyncSave> start(comm::Communicator& comm, const Providers& providers,
                                          const SaveRequest& request, std::vector<at::Tensor>& reuse);
  // Joins the writer. A save never published stays a staging directory beside `latest`.
  ~AsyncSave();
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;

  // Collective. Publishes the checkpoint once every rank's file is written: with `wait`,
  // after waiting for this rank's; without, only if every rank's is already done. Returns
  // the checkpoint when published, nullopt when a rank is still writing. A failed write on
  // any rank throws CheckpointError on every rank (the staging directory removed).
  std::optional<SavedCheckpoint> finish(comm::Communicator& comm, bool wait);

  const std::filesystem::path& dir() const;
  double blocked_seconds() const { return blocked_seconds_; }

 private:
  AsyncSave() = default;

  std::unique_ptr<SaveTransaction> tx_;
  std::thread writer_;
  std::atomic<bool> written_{false};
  RankStatus wrote_;   // the writer's, read after joining it
  bool settled_ = false;   // published, or its failure thrown
  double blocked_seconds_ = 0;   // the training thread's share of the save
};

}  // namespace zerotrain::checkpoint
