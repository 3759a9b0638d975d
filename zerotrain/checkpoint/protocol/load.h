// A checkpoint load as one transaction over all ranks (docs/checkpoints.md): every rank opens
// the tag, and the providers check it against their state and plan their reads; a checkpoint
// that is incomplete, of another model or damaged in its manifest or headers is refused by
// every rank before anything changes. The planned fragments are then read straight into
// place, each checked against its checksum, and once every rank has read its part the
// providers commit.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/protocol/provider.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/schema_misc.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {

struct LoadRequest {
  std::filesystem::path load_dir;
  std::string tag;   // empty: the one `latest` names
  config::TagValidation tag_validation = config::TagValidation::kWarn;
};

struct LoadedTag {
  std::filesystem::path dir;   // <load_dir>/<tag>
  Manifest manifest;
};

// The reads failed on some rank after they had begun: what was planned may be partly
// overwritten (a fragment found damaged on disk). Its owner must not be trusted until a load
// succeeds.
class PartialLoadError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// nullopt (and a warning on rank 0) when the tag is empty and there is no `latest`, as
// DeepSpeed returns (None, None).
std::optional<LoadedTag> load(comm::Communicator& comm, const Providers& providers, const LoadRequest& request);

}  // namespace zerotrain::checkpoint
