// A checkpoint save as one transaction over all ranks (docs/checkpoints.md). It runs in
// phases, and after each every rank learns whether every rank succeeded (agreement.h), so a
// failure anywhere stops the save everywhere: (1) the leader makes a staging directory
// ".<tag>.partial"; (2) the providers give each rank's tensors, and each rank checks the disk
// has room for all of them and writes its file there, fsync'd; (3) the leader writes the
// manifest, swaps the staging directory into place as <tag>, then moves `latest`. Until (3)
// the previous checkpoint is untouched.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/protocol/provider.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/schema_misc.h"

namespace zerotrain::checkpoint {

struct SaveRequest {
  std::filesystem::path save_dir;
  std::string tag;                   // a valid tag (reader.h valid_tag)
  bool save_latest = true;           // move `latest` to it
  bool use_node_local_storage = false;   // checkpoint.use_node_local_storage: a leader per node
  config::TagValidation tag_validation = config::TagValidation::kWarn;
  Json ds_config;                    // recorded in the manifest
  Json client_state;                 // the caller's, returned by the load
};

struct SavedCheckpoint {
  std::filesystem::path dir;   // <save_dir>/<tag>
  int64_t bytes = 0;           // of every rank's file
  double seconds = 0;
};

SavedCheckpoint save(comm::Communicator& comm, const Providers& providers, const SaveRequest& request);

}  // namespace zerotrain::checkpoint
