#include "zerotrain/checkpoint/protocol/save.h"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/protocol/save_transaction.h"
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
void publish_directory(const fs::path& staging, const fs::path& final_dir) {
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

SaveTransaction::SaveTransaction(comm::Communicator& comm, SaveRequest request)
    : request_(std::move(request)),
      final_dir_(request_.save_dir / request_.tag),
      staging_(request_.save_dir / ("." + request_.tag + ".partial")),
      leader_(leads_save_directory(request_.use_node_local_storage, comm.rank())),
      what_("saving checkpoint " + final_dir_.string()),
      started_(std::chrono::steady_clock::now()),
      contents_(comm.rank(), comm.world_size()) {}

void SaveTransaction::settle(const std::vector<RankStatus>& statuses) {
  const bool failed = std::any_of(statuses.begin(), statuses.end(), [](const RankStatus& r) { return !r.error.empty(); });
  if (failed && leader_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
  throw_if_any_failed(statuses, what_);
}

void SaveTransaction::stage(comm::Communicator& comm) {
  const std::string& tag = request_.tag;
  ZT_CHECK(valid_tag(tag), UsageError, "checkpoint tag \"", tag,
           "\" cannot name a directory: use printable characters without '/', not starting with '.'");
  validate_tag(comm, tag, request_.tag_validation);
  const fs::path& dir = request_.save_dir;
  RankStatus made;
  if (leader_) {
    made.error = capture([&] {
      // The tag's folder and `latest` are zerotrain's own (core/output_path.h): a link or a
      // file where the tag goes, or a link, a FIFO or a folder named `latest`, is refused
      // before anything is written, not followed or replaced.
      files::check_own_directory(final_dir_, "checkpoint tag folder");
      if (request_.save_latest) files::check_output_file(dir / kLatestName, {.what = "checkpoint `latest` file"});
      try {
        fs::create_directories(dir);
        fs::remove_all(staging_);
        fs::create_directory(staging_);
      } catch (const fs::filesystem_error& e) {
        throw IoError("cannot create the staging directory " + staging_.string() + ": " +
                      write_error_cause(e.code().value()) + "; the previous checkpoint is untouched");
      }
    });
  }
  throw_if_any_failed(exchange_status(comm, made), what_);
}

RankStatus SaveTransaction::gather(const Providers& providers) {
  providers_ = &providers;
  RankStatus gathered;
  gathered.error = capture([&] {
    for (const auto& provider : providers) provider->save(contents_);
  });
  return gathered;
}

std::vector<RankStatus> SaveTransaction::agree(comm::Communicator& comm, const RankStatus& gathered) {
  auto statuses = exchange_status(comm, gathered);
  settle(statuses);
  return statuses;
}

void SaveTransaction::size_and_check_room(comm::Communicator& comm, TensorChecksums checksums) {
  RankStatus sized;
  sized.error = capture([&] {
    file_ = prepare_safetensors(contents_.take_sources(), {{"format", "zerotrain-rank-file"}}, checksums);
    sized.values[0] = file_.bytes();
  });
  const auto sizes = exchange_status(comm, sized);
  settle(sizes);
  // Every rank checks for room before any rank writes (a rank checking later would see the
  // others' bytes already used). The leader also counts the manifest and `latest`.
  total_ = 0;
  for (const auto& r : sizes) total_ += r.values[0];
  RankStatus room;
  room.error = capture([&] {
    int64_t own = 0;
    if (leader_) {
      manifest_ = describe(*providers_, request_, comm.world_size(), sizes);
      own = static_cast<int64_t>(manifest_to_json(manifest_).dump(1).size() + request_.tag.size());
    }
    check_room(staging_, total_ + own, file_.bytes());
  });
  settle(exchange_status(comm, room));
}

RankStatus SaveTransaction::write() {
  RankStatus wrote;
  wrote.error = capture([&] {
    fill_tensor_checksums(file_);
    const WrittenFile w = write_safetensors(staging_ / rank_file_name(contents_.rank()), file_);
    wrote.values = {w.bytes, static_cast<int64_t>(w.checksum), static_cast<int64_t>(w.header_checksum)};
  });
  contents_.release();
  file_ = {};
  return wrote;
}

SavedCheckpoint SaveTransaction::publish(comm::Communicator& comm, const RankStatus& wrote) {
  const auto files = exchange_status(comm, wrote);
  settle(files);
  RankStatus published;
  if (leader_) {
    published.error = capture([&] {
      for (size_t r = 0; r < files.size(); ++r) {
        FileRecord& f = manifest_.files[r];
        f.bytes = files[r].values[0];
        f.checksum = static_cast<uint64_t>(files[r].values[1]);
        f.header_checksum = static_cast<uint64_t>(files[r].values[2]);
      }
      AtomicFile manifest_file(staging_ / kManifestName);
      manifest_file.write(manifest_to_json(manifest_).dump(1));
      manifest_file.commit();
      publish_directory(staging_, final_dir_);
      if (request_.save_latest) {
        AtomicFile latest(request_.save_dir / kLatestName);
        latest.write(request_.tag);
        latest.commit();
      }
    });
  }
  settle(exchange_status(comm, published));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return {final_dir_, total_, seconds};
}

SavedCheckpoint save(comm::Communicator& comm, const Providers& providers, const SaveRequest& request) {
  SaveTransaction tx(comm, request);
  tx.stage(comm);
  tx.agree(comm, tx.gather(providers));
  tx.size_and_check_room(comm, TensorChecksums::kNow);
  const SavedCheckpoint saved = tx.publish(comm, tx.write());
  if (comm.rank() == 0) {
    ZT_LOG_INFO("saved checkpoint ", saved.dir.string(), ": ", comm.world_size(), " rank file(s), ",
                static_cast<double>(saved.bytes) / (1 << 20), " MiB in ", saved.seconds, " s");
  }
  return saved;
}

}  // namespace zerotrain::checkpoint
