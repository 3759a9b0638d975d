#include "zerotrain/checkpoint/protocol/load.h"

#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::checkpoint {

namespace fs = std::filesystem;

std::optional<LoadedTag> load(comm::Communicator& comm, const Providers& providers, const LoadRequest& request) {
  std::string tag = request.tag;
  if (tag.empty()) {
    const std::optional<std::string> latest = read_latest_tag(request.load_dir);
    if (!latest) {
      if (comm.rank() == 0) {
        ZT_LOG_WARN("Unable to find latest file at ", (request.load_dir / kLatestName).string(),
                    "; nothing was loaded. Pass an explicit tag to load a checkpoint without it");
      }
      return std::nullopt;
    }
    tag = *latest;
  }
  ZT_CHECK(valid_tag(tag), UsageError, "checkpoint tag \"", tag, "\" cannot name a tag directory");
  validate_tag(comm, tag, request.tag_validation);
  const fs::path tag_dir = request.load_dir / tag;
  const std::string what = "loading checkpoint " + tag_dir.string();

  // Everything is checked before anything changes: the manifest, every rank file's header
  // and every tensor a rank will read.
  std::optional<CheckpointReader> reader;
  std::optional<LoadPlan> plan;
  RankStatus planned;
  planned.error = capture([&] {
    reader.emplace(tag_dir);
    plan.emplace(*reader, comm.rank(), comm.world_size());
    for (const auto& provider : providers) provider->plan_load(*plan);
  });
  throw_if_any_failed(exchange_status(comm, planned), what);
  // Then the fragments, each checked against its checksum. One damaged on disk, found now,
  // has left what was planned partly overwritten.
  RankStatus read;
  read.error = capture([&] { plan->execute_reads(); });
  try {
    throw_if_any_failed(exchange_status(comm, read), what);
  } catch (const CheckpointError& e) {
    throw PartialLoadError(e.message());
  }
  for (const auto& provider : providers) provider->commit_load(reader->manifest());
  return LoadedTag{tag_dir, reader->manifest()};
}

}  // namespace zerotrain::checkpoint
