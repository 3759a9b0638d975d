#include "zerotrain/offload/param_swap_nvme.h"

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "zerotrain/core/error.h"

namespace zerotrain::offload {
namespace {

namespace fs = std::filesystem;

class NvmeParamSwap final : public stages::stage3::ParamSwap {
 public:
  NvmeParamSwap(std::string dir, const io::AioOptions& aio) : dir_(std::move(dir)), engine_(io::make_io_engine(aio)) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    ZT_CHECK(!ec, IoError, "nvme parameter offload: cannot create ", dir_, ": ", ec.message(),
             "; point offload_param.nvme_path at a writable directory on a local disk");
  }
  ~NvmeParamSwap() override {
    try {
      engine_->wait_all();
    } catch (...) {   // reported by the call that failed
    }
    for (auto& g : groups_) {
      const std::string path = g.file.path();
      g.file = io::DirectFile();
      std::error_code ec;
      if (!path.empty()) fs::remove(path, ec);
    }
  }

  void add_group(std::size_t group, const std::vector<int64_t>& chunk_numels, at::ScalarType dtype) override {
    ZT_INTERNAL_ASSERT(group == groups_.size(), "parameter swap groups added out of order");
    Group& g = groups_.emplace_back();
    g.dtype = dtype;
    g.numels = chunk_numels;
    int64_t offset = 0;
    for (std::size_t k = 0; k < chunk_numels.size(); ++k) {
      g.offsets.push_back(offset);
      offset += chunk_bytes(g, k);
    }
    g.file = io::DirectFile::open((fs::path(dir_) / ("group" + std::to_string(group) + "_params.swp")).string(),
                                  io::DirectFile::Mode::kCreate);
    g.file.reserve(std::max<int64_t>(offset, io::kAlignmentBytes));
    g.nbytes = offset;
  }

  void write(std::size_t group, std::size_t bucket, const at::Tensor& chunk) override {
    Group& g = groups_.at(group);
    const int64_t bytes = chunk_bytes(g, bucket);
    ZT_INTERNAL_ASSERT(chunk.numel() == g.numels[bucket] && chunk.scalar_type() == g.dtype, "parameter chunk mismatch");
    io::AlignedBuffer buffer(bytes);
    const int64_t used = chunk.numel() * static_cast<int64_t>(chunk.element_size());
    std::memcpy(buffer.data(), chunk.contiguous().data_ptr(), static_cast<size_t>(used));
    std::memset(static_cast<char*>(buffer.data()) + used, 0, static_cast<size_t>(buffer.nbytes() - used));
    engine_->wait(engine_->submit({&g.file, g.offsets[bucket], buffer.data(), bytes, true}));
  }

  Pending start_read(std::size_t group, std::size_t bucket) override {
    Group& g = groups_.at(group);
    Read r;
    r.group = group;
    r.bucket = bucket;
    r.buffer = std::make_shared<io::AlignedBuffer>(chunk_bytes(g, bucket));
    r.ticket = engine_->submit({&g.file, g.offsets[bucket], r.buffer->data(), chunk_bytes(g, bucket), false});
    const Pending id = next_++;
    reads_.emplace(id, std::move(r));
    return id;
  }

  at::Tensor finish_read(Pending pending) override {
    auto it = reads_.find(pending);
    ZT_INTERNAL_ASSERT(it != reads_.end(), "parameter read finished twice");
    Read r = std::move(it->second);
    reads_.erase(it);
    engine_->wait(r.ticket);
    const Group& g = groups_[r.group];
    // The tensor owns the aligned buffer it was read into: no copy.
    auto owner = r.buffer;
    return at::from_blob(owner->data(), {g.numels[r.bucket]}, [owner](void*) mutable { owner.reset(); },
                         at::TensorOptions().dtype(g.dtype));
  }

  int64_t disk_nbytes() const override {
    int64_t total = 0;
    for (const auto& g : groups_) total += g.nbytes;
    return total;
  }
  std::string describe() const override {
    return ::zerotrain::detail::str("parameter shards in files in ", dir_, " (", engine_->name(), ")");
  }

 private:
  struct Group {
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> numels, offsets;
    io::DirectFile file;
    int64_t nbytes = 0;
  };
  struct Read {
    std::size_t group = 0, bucket = 0;
    std::shared_ptr<io::AlignedBuffer> buffer;
    io::Ticket ticket = 0;
  };
  int64_t chunk_bytes(const Group& g, std::size_t bucket) const {
    return io::align_up(std::max<int64_t>(g.numels[bucket], 1) * static_cast<int64_t>(c10::elementSize(g.dtype)));
  }

  std::string dir_;
  std::unique_ptr<io::IoEngine> engine_;
  std::vector<Group> groups_;
  std::unordered_map<Pending, Read> reads_;
  Pending next_ = 1;
};

}  // namespace

std::unique_ptr<stages::stage3::ParamSwap> make_nvme_param_swap(const std::string& dir, const io::AioOptions& aio) {
  return std::make_unique<NvmeParamSwap>(dir, aio);
}

}  // namespace zerotrain::offload
