// The phases of a checkpoint save (save.h), shared by the synchronous save and the
// asynchronous one (async_save.h). Each collective phase ends with every rank learning
// whether every rank succeeded; a failure removes the staging directory and throws
// CheckpointError on every rank. Only write() is local to a rank, so a background thread
// may run it while the training thread goes on with its collectives.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/protocol/provider.h"
#include "zerotrain/checkpoint/protocol/save.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/comm/communicator.h"

namespace zerotrain::checkpoint {

class SaveTransaction {
 public:
  SaveTransaction(comm::Communicator& comm, SaveRequest request);

  // (1) The tag checked, and the leader's staging directory made. Collective.
  void stage(comm::Communicator& comm);
  // (2a) The providers' tensors of this rank, held (not copied where they are host memory).
  // Local: its error, if any, is reported by the next collective phase.
  RankStatus gather(const Providers& providers);
  RankFileContents& contents() { return contents_; }
  // After gather(): every rank's outcome, with the values it put in `gathered`. Collective.
  std::vector<RankStatus> agree(comm::Communicator& comm, const RankStatus& gathered);
  // (2b) The rank file's header, every rank's size, and the room for all of them checked.
  // Collective.
  void size_and_check_room(comm::Communicator& comm, TensorChecksums checksums);
  // (2c) This rank's file written into the staging directory, fsync'd. Local.
  RankStatus write();
  // (3) Every rank's write outcome; the leader writes the manifest, publishes the tag and
  // moves `latest`. Collective.
  SavedCheckpoint publish(comm::Communicator& comm, const RankStatus& wrote);

  const std::filesystem::path& final_dir() const { return final_dir_; }
  int64_t total_bytes() const { return total_; }

 private:
  // Throws on every rank when any failed, the leader removing the staging directory first.
  void settle(const std::vector<RankStatus>& statuses);

  SaveRequest request_;
  std::filesystem::path final_dir_, staging_;
  bool leader_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point started_;
  const Providers* providers_ = nullptr;
  RankFileContents contents_;
  PreparedFile file_;
  Manifest manifest_;   // the leader's
  int64_t total_ = 0;
};

}  // namespace zerotrain::checkpoint
