// offload_optimizer.device "nvme": each group's master weights and moments live in three
// files under nvme_path, and only `buffer_sets` sub-groups are in memory at a time. The
// files hold sub-group k at byte k * align_up(sub-group bytes), so every read and write is
// one aligned O_DIRECT request (a sub-group's bytes are padded to the alignment). The sets form a ring: with pipeline_read the next sub-groups are read while
// one is stepped; with pipeline_write a stepped sub-group is written while the next is.
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <optional>

#include "zerotrain/core/error.h"
#include "zerotrain/offload/state_store.h"

namespace zerotrain::offload {
namespace {

namespace fs = std::filesystem;
constexpr std::array<const char*, 3> kNames{"master", "exp_avg", "exp_avg_sq"};

struct SwapGroup {
  int64_t numel = 0;
  std::array<io::DirectFile, 3> files;
  bool fresh_moments = true;   // never written: the moments are zeros, nothing to read
  // After write_range began on fresh moments: per moment file (1, 2), the chunks still zeros
  // that are not on disk yet (flush_writes writes them); empty when there are none.
  std::array<std::vector<bool>, 3> zero_chunks;
  bool written_in_pass = false;   // a sub-group of it was written back in the pass under way
};

struct BufferSet {
  std::array<io::AlignedBuffer, 3> buffers;
  std::vector<io::Ticket> reads, writes;
};

class NvmeStore final : public StateStore {
 public:
  explicit NvmeStore(NvmeStoreOptions o) : o_(std::move(o)), engine_(io::make_io_engine(o_.aio)) {
    ZT_CHECK(o_.max_sub_group_numel > 0 && o_.buffer_sets >= 1, UsageError, "nvme offload: empty sub-groups or no buffers");
    std::error_code ec;
    fs::create_directories(o_.dir, ec);
    ZT_CHECK(!ec, IoError, "nvme offload: cannot create ", o_.dir, ": ", ec.message(),
             "; point nvme_path at a writable directory on a local disk");
    const int64_t bytes = io::align_up(o_.max_sub_group_numel * 4);
    sets_.resize(static_cast<size_t>(o_.buffer_sets));
    for (auto& set : sets_) {
      for (auto& b : set.buffers) b = io::AlignedBuffer(bytes);
    }
  }

  ~NvmeStore() override {
    try {
      engine_->wait_all();
    } catch (...) {   // the step that failed reported it
    }
    for (auto& g : groups_) {
      for (auto& f : g.files) {
        const std::string path = f.path();
        f = io::DirectFile();
        std::error_code ec;
        if (!path.empty()) fs::remove(path, ec);
      }
    }
  }

  void add_group(std::size_t group, int64_t numel, const MasterFill& fill) override {
    ZT_INTERNAL_ASSERT(group == groups_.size(), "offload groups added out of order");
    SwapGroup& g = groups_.emplace_back();
    g.numel = numel;
    for (size_t i = 0; i < kNames.size(); ++i) {
      g.files[i] = io::DirectFile::open(path_of(group, kNames[i]), io::DirectFile::Mode::kCreate);
      g.files[i].reserve(file_bytes(g.numel));
    }
    write_file(g, 0, [&](int64_t offset, int64_t n, float* out) { fill(offset, n, out); });
  }

  void begin_pass(std::vector<SubGroup> order) override {
    forget_cached_chunks();
    // A pass that failed halfway leaves requests behind: they finish before the buffers
    // are used again (their errors were reported by the pass that failed).
    try {
      engine_->wait_all();
    } catch (const std::exception&) {
    }
    for (auto& set : sets_) set.reads.clear(), set.writes.clear();
    order_ = std::move(order);
    reads_issued_ = 0;
  }

  SubGroupArrays acquire(std::size_t k) override {
    const size_t ahead = o_.pipeline_read ? sets_.size() - (o_.pipeline_write ? 1 : 0) : 1;
    issue_reads(std::min(order_.size(), k + std::max<size_t>(ahead, 1)));
    BufferSet& set = set_of(k);
    engine_->wait_each(set.reads);
    set.reads.clear();
    return {data(set, 0), data(set, 1), data(set, 2)};
  }

  void release(std::size_t k) override {
    const SubGroup& sg = order_[k];
    BufferSet& set = set_of(k);
    const int64_t bytes = io::align_up(sg.numel * 4);
    for (size_t i = 0; i < 3; ++i) {
      set.writes.push_back(engine_->submit({&groups_[sg.group].files[i], offset_bytes(sg), set.buffers[i].data(), bytes, true}));
    }
    if (!o_.pipeline_write) wait_writes(set);
    groups_[sg.group].written_in_pass = true;
  }

  void release_unchanged(std::size_t) override {}

  void finish_pass() override {
    for (auto& set : sets_) wait_writes(set);
    // Moments that started as zeros in memory are on disk once the pass wrote their group.
    for (auto& g : groups_) {
      if (g.written_in_pass) g.fresh_moments = false;
      g.written_in_pass = false;
    }
    order_.clear();
  }

  GroupStates read_group(std::size_t group) override {
    forget_cached_chunks();
    SwapGroup& g = groups_.at(group);
    GroupStates s{at::empty({g.numel}, at::kFloat), at::empty({g.numel}, at::kFloat), at::empty({g.numel}, at::kFloat)};
    std::array<at::Tensor*, 3> out{&s.master, &s.exp_avg, &s.exp_avg_sq};
    for (size_t i = 0; i < 3; ++i) {
      if (i > 0 && g.fresh_moments) {
        out[i]->zero_();
        continue;
      }
      for_each_chunk(g, [&](int64_t offset, int64_t numel) {
        const int64_t bytes = io::align_up(numel * 4);
        engine_->wait(engine_->submit({&g.files[i], chunk_offset_bytes(offset), sets_[0].buffers[0].data(), bytes, false}));
        std::memcpy(out[i]->data_ptr<float>() + offset, sets_[0].buffers[0].data(), static_cast<size_t>(numel) * 4);
      });
    }
    return s;
  }

  void write_group(std::size_t group, const GroupStates& states) override {
    SwapGroup& g = groups_.at(group);
    const std::array<const at::Tensor*, 3> in{&states.master, &states.exp_avg, &states.exp_avg_sq};
    for (size_t i = 0; i < 3; ++i) {
      const at::Tensor t = in[i]->reshape(-1).to(at::kFloat).contiguous();
      write_file(g, i, [&](int64_t offset, int64_t n, float* out) {
        std::memcpy(out, t.data_ptr<float>() + offset, static_cast<size_t>(n) * 4);
      });
    }
    g.fresh_moments = false;
  }
  bool resident() const override { return false; }

  // A chunk at a time through buffer i of the first set, which keeps the last chunk of file
  // i that it read: a save asks for each parameter's piece of the three arrays in turn, and
  // consecutive pieces mostly lie in the same chunks.
  void read_range(std::size_t group, int which, int64_t offset, int64_t numel, float* out) override {
    SwapGroup& g = groups_.at(group);
    const auto i = static_cast<size_t>(which);
    ZT_INTERNAL_ASSERT(i < 3 && offset >= 0 && numel >= 0 && offset + numel <= g.numel, "offload read_range out of bounds");
    if (i > 0 && g.fresh_moments) {
      std::memset(out, 0, static_cast<size_t>(numel) * 4);
      return;
    }
    const int64_t chunk_numel = o_.max_sub_group_numel;
    for (int64_t pos = offset; pos < offset + numel;) {
      const int64_t chunk = pos / chunk_numel;
      const int64_t end = std::min(offset + numel, (chunk + 1) * chunk_numel);
      cache_chunk(group, i, chunk, true);
      std::memcpy(out + (pos - offset), data(sets_[0], i) + (pos - chunk * chunk_numel), static_cast<size_t>(end - pos) * 4);
      pos = end;
    }
  }

  void write_range(std::size_t group, int which, int64_t offset, int64_t numel, const float* in) override {
    SwapGroup& g = groups_.at(group);
    const auto i = static_cast<size_t>(which);
    ZT_INTERNAL_ASSERT(i < 3 && offset >= 0 && numel >= 0 && offset + numel <= g.numel, "offload write_range out of bounds");
    if (i > 0 && g.fresh_moments) {
      // The moments were never written: every chunk is zeros, put on disk when first written
      // (or by flush_writes for those no range reaches), so a load writes each chunk once.
      const auto chunks = static_cast<size_t>((g.numel + o_.max_sub_group_numel - 1) / o_.max_sub_group_numel);
      g.zero_chunks[1].assign(chunks, true);
      g.zero_chunks[2].assign(chunks, true);
      g.fresh_moments = false;
    }
    const int64_t chunk_numel = o_.max_sub_group_numel;
    for (int64_t pos = offset; pos < offset + numel;) {
      const int64_t chunk = pos / chunk_numel;
      const int64_t begin = chunk * chunk_numel;
      const int64_t end = std::min(offset + numel, begin + chunk_numel);
      // A write that covers the whole chunk need not read it first.
      const bool whole = pos == begin && end == std::min(g.numel, begin + chunk_numel);
      cache_chunk(group, i, chunk, !whole);
      std::memcpy(data(sets_[0], i) + (pos - begin), in + (pos - offset), static_cast<size_t>(end - pos) * 4);
      cached_[i].dirty = true;
      pos = end;
    }
  }

  void flush_writes() override {
    for (size_t i = 0; i < cached_.size(); ++i) flush_cached(i);
    for (std::size_t group = 0; group < groups_.size(); ++group) {
      for (size_t i = 1; i < 3; ++i) {
        const std::vector<bool> zero = groups_[group].zero_chunks[i];
        for (size_t chunk = 0; chunk < zero.size(); ++chunk) {
          if (!zero[chunk]) continue;
          cache_chunk(group, i, static_cast<int64_t>(chunk), true);   // zeros, not read
          cached_[i].dirty = true;
          flush_cached(i);
        }
      }
    }
  }

  int64_t host_nbytes() const override {
    return static_cast<int64_t>(sets_.size()) * 3 * io::align_up(o_.max_sub_group_numel * 4);
  }
  int64_t disk_nbytes() const override {
    int64_t total = 0;
    for (const auto& g : groups_) total += 3 * file_bytes(g.numel);
    return total;
  }
  std::string describe() const override {
    return ::zerotrain::detail::str("files in ", o_.dir, " (", engine_->name(), ", ", sets_.size(), " buffer set",
                                    sets_.size() == 1 ? "" : "s", " of ", o_.max_sub_group_numel, " elements",
                                    o_.pipeline_read ? ", read ahead" : "", o_.pipeline_write ? ", written behind" : "",
                                    ")");
  }

 private:
  std::string path_of(std::size_t group, const char* name) const {
    return (fs::path(o_.dir) / ("group" + std::to_string(group) + "_" + name + ".swp")).string();
  }
  int64_t chunk_bytes() const { return io::align_up(o_.max_sub_group_numel * 4); }
  int64_t file_bytes(int64_t numel) const {   // estimate::nvme_optimizer_disk_bytes counts three of these
    const int64_t chunks = (numel + o_.max_sub_group_numel - 1) / o_.max_sub_group_numel;
    return std::max<int64_t>(chunks, 1) * chunk_bytes();
  }
  // Sub-group offsets are multiples of max_sub_group_numel; each starts a chunk of the file.
  int64_t chunk_offset_bytes(int64_t offset_numel) const { return offset_numel / o_.max_sub_group_numel * chunk_bytes(); }
  int64_t offset_bytes(const SubGroup& sg) const { return chunk_offset_bytes(sg.offset); }
  BufferSet& set_of(std::size_t k) { return sets_[k % sets_.size()]; }
  float* data(BufferSet& set, size_t i) { return static_cast<float*>(set.buffers[i].data()); }

  template <class F>
  void for_each_chunk(const SwapGroup& g, F&& f) {
    for (int64_t offset = 0; offset < g.numel; offset += o_.max_sub_group_numel) {
      f(offset, std::min(o_.max_sub_group_numel, g.numel - offset));
    }
  }

  void issue_reads(std::size_t until) {
    for (; reads_issued_ < until; ++reads_issued_) {
      const SubGroup& sg = order_[reads_issued_];
      ZT_INTERNAL_ASSERT(sg.offset % o_.max_sub_group_numel == 0 && sg.numel <= o_.max_sub_group_numel,
                         "offload sub-group not on a chunk boundary");
      BufferSet& set = set_of(reads_issued_);
      wait_writes(set);   // the set's last sub-group must be on disk before it is reused
      SwapGroup& g = groups_[sg.group];
      const int64_t bytes = io::align_up(sg.numel * 4);
      for (size_t i = 0; i < 3; ++i) {
        if (i > 0 && g.fresh_moments) {
          std::memset(set.buffers[i].data(), 0, static_cast<size_t>(bytes));
          continue;
        }
        set.reads.push_back(engine_->submit({&g.files[i], offset_bytes(sg), set.buffers[i].data(), bytes, false}));
      }
    }
  }

  void wait_writes(BufferSet& set) {
    engine_->wait_each(set.writes);
    set.writes.clear();
  }

  // File `i` of `g`, a chunk at a time through the first buffer set, from `fill`.
  void write_file(SwapGroup& g, size_t i, const MasterFill& fill) {
    forget_cached_chunks();
    for (auto& set : sets_) wait_writes(set);
    for_each_chunk(g, [&](int64_t offset, int64_t numel) {
      const int64_t bytes = io::align_up(numel * 4);
      std::memset(static_cast<char*>(sets_[0].buffers[0].data()) + numel * 4, 0, static_cast<size_t>(bytes - numel * 4));
      fill(offset, numel, static_cast<float*>(sets_[0].buffers[0].data()));
      engine_->wait(engine_->submit({&g.files[i], chunk_offset_bytes(offset), sets_[0].buffers[0].data(), bytes, true}));
    });
  }

  // read_range's chunk in buffer i of the first set, per file i (none: group SIZE_MAX).
  struct CachedChunk {
    std::size_t group = SIZE_MAX;
    int64_t chunk = -1;
    bool dirty = false;   // written by write_range, not yet on disk
  };
  // Before the first set's buffers serve anything else: what write_range left there goes to disk.
  void forget_cached_chunks() {
    flush_writes();
    cached_ = {};
  }

  // Chunk `chunk` of file `i` of `group` in buffer i of the first set: the one there, or
  // (after what is buffered there went to disk) read when `need_contents`.
  void cache_chunk(std::size_t group, size_t i, int64_t chunk, bool need_contents) {
    CachedChunk& cached = cached_[i];
    if (cached.group == group && cached.chunk == chunk) return;
    flush_cached(i);
    for (auto& set : sets_) wait_writes(set);
    cached = {};   // a failed read leaves nothing cached
    SwapGroup& g = groups_.at(group);
    const int64_t begin = chunk * o_.max_sub_group_numel;
    const int64_t bytes = io::align_up(std::min(o_.max_sub_group_numel, g.numel - begin) * 4);
    const std::vector<bool>& zero = g.zero_chunks[i];
    if (need_contents && !zero.empty() && zero[static_cast<size_t>(chunk)]) {
      std::memset(sets_[0].buffers[i].data(), 0, static_cast<size_t>(bytes));
    } else if (need_contents) {
      engine_->wait(engine_->submit({&g.files[i], chunk_offset_bytes(begin), sets_[0].buffers[i].data(), bytes, false}));
    }
    cached = {group, chunk, false};
  }

  void flush_cached(size_t i) {
    CachedChunk& cached = cached_[i];
    if (!cached.dirty) return;
    SwapGroup& g = groups_.at(cached.group);
    const int64_t begin = cached.chunk * o_.max_sub_group_numel;
    const int64_t numel = std::min(o_.max_sub_group_numel, g.numel - begin);
    const int64_t bytes = io::align_up(numel * 4);
    char* buffer = static_cast<char*>(sets_[0].buffers[i].data());
    std::memset(buffer + numel * 4, 0, static_cast<size_t>(bytes - numel * 4));
    engine_->wait(engine_->submit({&g.files[i], chunk_offset_bytes(begin), buffer, bytes, true}));
    cached.dirty = false;
    std::vector<bool>& zero = g.zero_chunks[i];
    if (!zero.empty()) {
      zero[static_cast<size_t>(cached.chunk)] = false;
      if (std::none_of(zero.begin(), zero.end(), [](bool z) { return z; })) zero.clear();
    }
  }

  NvmeStoreOptions o_;
  std::array<CachedChunk, 3> cached_;
  std::unique_ptr<io::IoEngine> engine_;
  std::vector<SwapGroup> groups_;
  std::vector<BufferSet> sets_;
  std::vector<SubGroup> order_;
  std::size_t reads_issued_ = 0;
};

}  // namespace

std::unique_ptr<StateStore> make_nvme_store(const NvmeStoreOptions& options) {
  return std::make_unique<NvmeStore>(options);
}

}  // namespace zerotrain::offload
