// What a checkpoint holds besides its own bookkeeping comes from providers: each owner of
// state (the weights and optimizer states, the schedule, the loss scaler, the generators...)
// registers one, and the transaction (save.h, load.h) calls them. A provider only says what
// it saves and where what it loads goes; the staging directory, the room check, the files,
// the agreement between ranks and the publishing are the transaction's.
//
//   save:  save() on every rank (this rank's tensors), describe() on the rank writing the
//          manifest;
//   load:  plan_load() on every rank (check the checkpoint, plan the reads; nothing changes),
//          the planned reads, then commit_load() once every rank's reads succeeded.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/writer.h"

namespace zerotrain::checkpoint {

class CheckpointReader;

// The tensors of this rank's file, as providers add them.
class RankFileContents {
 public:
  RankFileContents(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // `t` whole under `key`, in its own dtype; copied to host memory if it is elsewhere.
  void add(std::string key, const at::Tensor& t);
  // Elements [offset, offset + numel) of `t` (1-D fp32, held by hold()) under `key`.
  void add_fp32_range(std::string key, const at::Tensor& t, int64_t offset, int64_t numel);
  // A tensor whose bytes `read` copies out when the file is written (or snapshotted), a
  // piece at a time: offloaded states stream from their store instead of being in memory.
  void add_read(std::string key, Dtype dtype, std::vector<int64_t> shape, TensorSource::Read read);
  // `t` in host memory, contiguous, kept alive until the file is written.
  at::Tensor hold(const at::Tensor& t);

  std::vector<TensorSource> take_sources() { return std::move(sources_); }
  void release() { keep_.clear(); }

  // Bytes of the file's tensors that are in the live state itself (host tensors held
  // without a copy): what snapshot() copies.
  int64_t live_bytes() const;
  // Copies the file's tensors that are in the live state into one buffer and points the
  // sources at the copies, so that training may change the state while the file is
  // written. `reuse`: a previous snapshot's buffer, taken when it is large enough (its pages
  // are touched once, not at every save); it gets this snapshot's.
  void snapshot(std::vector<at::Tensor>& reuse);

 private:
  std::vector<size_t> live_sources() const;   // indices into sources_

  struct Held {
    at::Tensor tensor;
    bool live = false;   // shares its memory with the state it was given
  };
  int rank_, world_size_;
  std::vector<TensorSource> sources_;
  std::vector<Held> keep_;
};

// A load being planned: what each provider will read, checked before anything changes.
class LoadPlan {
 public:
  LoadPlan(CheckpointReader& reader, int rank, int world_size) : reader_(reader), rank_(rank), world_size_(world_size) {}
  CheckpointReader& reader() { return reader_; }
  const Manifest& manifest() const;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::string manifest_file() const;       // paths, for messages
  std::string rank_file(int rank) const;

  // `dst` (1-D fp32, on any device) gets elements [lo, lo + dst.numel()) of state `state`
  // ("fp32" for the weights) of `param`, from the saved fragments that overlap them; each
  // is checked now to be in its rank's file with the right size.
  void read_range(const ParamRecord& param, const std::string& state, int64_t lo, const at::Tensor& dst);
  // The same for a destination that is not a tensor in memory (optimizer states in files):
  // `sink(i, values, n)` gets elements [lo + i, lo + i + n) of the range, a piece of a
  // fragment at a time, so that no fragment is ever in memory whole.
  using Sink = std::function<void(int64_t index, const float* values, int64_t count)>;
  void read_range_to(const ParamRecord& param, const std::string& state, int64_t lo, int64_t numel, Sink sink);
  // `t` is zeroed with the reads (state the checkpoint lacks).
  void zero_with_reads(const at::Tensor& t);
  // `numel` zeros into `sink`, with the reads.
  void zero_to(int64_t numel, Sink sink);
  // A small tensor of a rank's file, read into host memory now (planning is the time to
  // find it missing or of the wrong kind).
  at::Tensor read_now(int rank, const std::string& key, Dtype dtype, const std::vector<int64_t>& shape);

  // The transaction's read phase: the planned reads, each checked against its checksum.
  void execute_reads();

 private:
  struct Read {
    int rank = 0;
    std::string key;
    at::Tensor dst;   // 1-D fp32: gets the fragment's elements [skip, skip + dst.numel())
    int64_t skip = 0;
    int64_t fragment_numel = 0;
    // Or, without dst: `sink` gets the fragment's elements [skip, skip + count) at index `at`.
    Sink sink;
    int64_t at = 0;
    int64_t count = 0;
  };
  // The fragments of `param`'s `state` overlapping [lo, hi), each checked to be in its rank's
  // file with the right size: Reads with skip set, and `at`/`count` relative to lo.
  std::vector<Read> overlapping(const ParamRecord& param, const std::string& state, int64_t lo, int64_t hi);
  CheckpointReader& reader_;
  int rank_, world_size_;
  std::vector<Read> reads_;
  std::vector<at::Tensor> zero_;
  std::vector<std::pair<int64_t, Sink>> zero_sinks_;
};

class StateProvider {
 public:
  virtual ~StateProvider() = default;
  // This rank's tensors, into its file.
  virtual void save(RankFileContents& /*file*/) {}
  // Its fields of the manifest, on the rank that writes it.
  virtual void describe(Manifest& /*manifest*/) {}
  // Checks the checkpoint against this provider's state and plans what it reads: nothing
  // changes yet. A problem throws (CheckpointError names the file and what is wrong).
  virtual void plan_load(LoadPlan& /*plan*/) {}
  // Every rank planned and read its part: the state takes what was read.
  virtual void commit_load(const Manifest& /*manifest*/) {}
};

using Providers = std::vector<std::unique_ptr<StateProvider>>;

}  // namespace zerotrain::checkpoint
