#include "zerotrain/checkpoint/protocol/save.h"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/output_path.h"
#include "zerotrain/version.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

// `staging` becomes `final_dir`; an existing `final_dir` (a tag saved again) is replaced in
// one step where the file system can exchange directories.
void publish(const fs::path& staging, const fs::path& final_dir) {
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    fs::rename(staging, final_dir);
  } else if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(staging);
  } else {
    const fs::path old = final_dir.parent_path() / ("." + final_dir.filename().string() + ".old");
    fs::remove_all(old);
    fs::rename(final_dir, old);
    fs::rename(staging, final_dir);
    fs::remove_all(old);
  }
  fsync_directory(final_dir.parent_path());
}

// The manifest, once every rank's file size is known; the checksums are filled in after the
// writes (their hex is fixed-width, so the size counted for the room check stays right).
Manifest describe(const Providers& providers, const SaveRequest& request, int world,
                  const std::vector<RankStatus>& sizes) {
  Manifest m;
  m.tag = request.tag;
  m.zerotrain_version = ZEROTRAIN_VERSION;
  m.world_size = world;
  for (const auto& provider : providers) provider->describe(m);
  for (int r = 0; r < world; ++r) m.files.push_back({r, rank_file_name(r), sizes[static_cast<size_t>(r)].values[0], 0, 0});
  m.ds_config = request.ds_config;
  m.client_state = request.client_state;
  return m;
}

}  // namespace

SavedCheckpoint save(comm::Communicator& comm, const Providers& providers, const SaveRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  const std::string& tag = request.tag;
  ZT_CHECK(valid_tag(tag), UsageError, "checkpoint tag \"", tag,
           "\" cannot name a directory: use printable characters without '/', not starting with '.'");
  validate_tag(comm, tag, request.tag_validation);
  const fs::path& dir = request.save_dir;
  const fs::path final_dir = dir / tag, staging = dir / ("." + tag + ".partial");
  const int rank = comm.rank(), world = comm.world_size();
  const bool leader = leads_save_directory(request.use_node_local_storage, rank);
  const std::string what = "saving checkpoint " + final_dir.string();

  RankStatus made;
  if (leader) {
    made.error = capture([&] {
      // The tag's folder and `latest` are zerotrain's own (core/output_path.h): a link or a
      // file where the tag goes, or a link, a FIFO or a folder named `latest`, is refused
      // before anything is written, not followed or replaced.
      files::check_own_directory(final_dir, "checkpoint tag folder");
      if (request.save_latest) files::check_output_file(dir / kLatestName, {.what = "checkpoint `latest` file"});
      try {
        fs::create_directories(dir);
        fs::remove_all(staging);
        fs::create_directory(staging);
      } catch (const fs::filesystem_error& e) {
        throw IoError("cannot create the staging directory " + staging.string() + ": " +
                      write_error_cause(e.code().value()) + "; the previous checkpoint is untouched");
      }
    });
  }
  throw_if_any_failed(exchange_status(comm, made), what);
  // After each later phase: if any rank failed, the staging directory goes and every rank throws.
  auto settle = [&](const std::vector<RankStatus>& statuses) {
    const bool failed = std::any_of(statuses.begin(), statuses.end(), [](const RankStatus& r) { return !r.error.empty(); });
    if (failed && leader) {
      std::error_code ec;
      fs::remove_all(staging, ec);
    }
    throw_if_any_failed(statuses, what);
  };

  RankFileContents contents(rank, world);
  PreparedFile file;
  RankStatus sized;
  sized.error = capture([&] {
    for (const auto& provider : providers) provider->save(contents);
    file = prepare_safetensors(contents.take_sources(), {{"format", "zerotrain-rank-file"}}, true);
    sized.values[0] = file.bytes();
  });
  const auto sizes = exchange_status(comm, sized);
  settle(sizes);
  // Every rank checks for room before any rank writes (a rank checking later would see the
  // others' bytes already used). The leader also counts the manifest and `latest`.
  int64_t total = 0;
  for (const auto& r : sizes) total += r.values[0];
  Manifest manifest;
  RankStatus room;
  room.error = capture([&] {
    int64_t own = 0;
    if (leader) {
      manifest = describe(providers, request, world, sizes);
      own = static_cast<int64_t>(manifest_to_json(manifest).dump(1).size() + tag.size());
    }
    check_room(staging, total + own, file.bytes());
  });
  settle(exchange_status(comm, room));

  RankStatus wrote;
  wrote.error = capture([&] {
    const WrittenFile w = write_safetensors(staging / rank_file_name(rank), file);
    wrote.values = {w.bytes, static_cast<int64_t>(w.checksum), static_cast<int64_t>(w.header_checksum)};
  });
  contents.release();
  const auto files = exchange_status(comm, wrote);
  settle(files);

  RankStatus published;
  if (leader) {
    published.error = capture([&] {
      for (int r = 0; r < world; ++r) {
        FileRecord& f = manifest.files[static_cast<size_t>(r)];
        f.bytes = files[static_cast<size_t>(r)].values[0];
        f.checksum = static_cast<uint64_t>(files[static_cast<size_t>(r)].values[1]);
        f.header_checksum = static_cast<uint64_t>(files[static_cast<size_t>(r)].values[2]);
      }
      AtomicFile manifest_file(staging / kManifestName);
      manifest_file.write(manifest_to_json(manifest).dump(1));
      manifest_file.commit();
      publish(staging, final_dir);
      if (request.save_latest) {
        AtomicFile latest(dir / kLatestName);
        latest.write(tag);
        latest.commit();
      }
    });
  }
  settle(exchange_status(comm, published));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (rank == 0) {
    ZT_LOG_INFO("saved checkpoint ", final_dir.string(), ": ", world, " rank file(s), ",
                static_cast<double>(total) / (1 << 20), " MiB in ", seconds, " s");
  }
  return {final_dir, total, seconds};
}

}  // namespace zerotrain::checkpoint
