#include "zerotrain/checkpoint/protocol/async_save.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <system_error>

#include "zerotrain/checkpoint/protocol/save_transaction.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/core/host_memory.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::checkpoint {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Why this rank cannot hold a snapshot of `bytes`, or "" when it can.
std::string snapshot_refusal(int64_t bytes) {
  const auto available = memory::available();
  if (!available) return "";
  const auto allowed = static_cast<int64_t>(static_cast<double>(available->bytes) * kSnapshotShareOfAvailable);
  if (bytes <= allowed) return "";
  return "its snapshot needs " + format_bytes(bytes) + " of host memory and " + format_bytes(available->bytes) +
         " are available (" + available->source + ")";
}

}  // namespace

std::unique_ptr<AsyncSave> AsyncSave::start(comm::Communicator& comm, const Providers& providers,
                                            const SaveRequest& request, std::vector<at::Tensor>& reuse) {
  const auto started = Clock::now();
  auto tx = std::make_unique<SaveTransaction>(comm, request);
  tx->stage(comm);
  // Every rank says how much live state it would copy and whether that fits; the ranks all
  // go asynchronous or all synchronous.
  RankStatus gathered = tx->gather(providers);
  std::string refusal;
  if (gathered.error.empty()) {
    gathered.values[0] = tx->contents().live_bytes();
    // The previous snapshot's buffer is taken over when it is large enough: no new memory.
    const int64_t reusable = reuse.size() == 1 ? static_cast<int64_t>(reuse[0].nbytes()) : 0;
    if (gathered.values[0] > reusable) refusal = snapshot_refusal(gathered.values[0]);
    gathered.values[1] = refusal.empty() ? 1 : 0;
  }
  const auto statuses = tx->agree(comm, gathered);
  const auto refused = std::find_if(statuses.begin(), statuses.end(), [](const RankStatus& r) { return r.values[1] == 0; });
  if (refused != statuses.end()) {
    if (!refusal.empty()) {
      ZT_LOG_WARN("checkpoint.async_save: rank ", comm.rank(), " saves ", tx->final_dir().string(),
                  " synchronously: ", refusal, ". Free memory, or set checkpoint.async_save false");
    }
    tx->size_and_check_room(comm, TensorChecksums::kNow);
    const SavedCheckpoint saved = tx->publish(comm, tx->write());
    if (comm.rank() == 0) {
      ZT_LOG_INFO("saved checkpoint ", saved.dir.string(), " synchronously (rank ", refused - statuses.begin(),
                  " had no memory for a snapshot): ", static_cast<double>(saved.bytes) / (1 << 20), " MiB in ",
                  saved.seconds, " s");
    }
    return nullptr;
  }
  // The copy can fail on one rank (its memory taken since the check, or never known): every
  // rank learns it in an agreed phase, and the staging directory goes.
  RankStatus copied;
  copied.error = capture([&] { tx->contents().snapshot(reuse); });
  tx->agree(comm, copied);
  // The checksums are the writer's: reading the data is part of writing it.
  tx->size_and_check_room(comm, TensorChecksums::kLater);

  std::unique_ptr<AsyncSave> save(new AsyncSave());
  save->tx_ = std::move(tx);
  save->blocked_seconds_ = seconds_since(started);
  AsyncSave* self = save.get();
  auto write = [self] {
    self->wrote_ = self->tx_->write();
    self->written_.store(true, std::memory_order_release);
  };
  try {
    save->writer_ = std::thread(write);
  } catch (const std::system_error& e) {
    // No thread to be had: this rank writes now, and the save publishes as any other.
    ZT_LOG_WARN("checkpoint.async_save: no background thread (", e.what(), "); rank ", comm.rank(),
                " writes its file of ", save->dir().string(), " now");
    write();
  }
  return save;
}

AsyncSave::~AsyncSave() {
  if (writer_.joinable()) writer_.join();
  if (!settled_) {
    ZT_LOG_WARN("the checkpoint ", tx_->final_dir().string(), " was written in the background but never published: ",
                "the engine ended before wait_for_checkpoint() (or another step, save or load) was called on every "
                "rank. `latest` still names the previous checkpoint");
  }
}

const std::filesystem::path& AsyncSave::dir() const { return tx_->final_dir(); }

std::optional<SavedCheckpoint> AsyncSave::finish(comm::Communicator& comm, bool wait) {
  const auto started = Clock::now();
  if (wait && writer_.joinable()) writer_.join();
  RankStatus done;
  done.values[0] = written_.load(std::memory_order_acquire) ? 1 : 0;
  const auto statuses = exchange_status(comm, done);
  if (std::any_of(statuses.begin(), statuses.end(), [](const RankStatus& r) { return r.values[0] == 0; })) {
    return std::nullopt;
  }
  if (writer_.joinable()) writer_.join();
  settled_ = true;   // published, or failed on every rank
  const SavedCheckpoint saved = tx_->publish(comm, wrote_);
  blocked_seconds_ += seconds_since(started);
  return saved;
}

}  // namespace zerotrain::checkpoint
