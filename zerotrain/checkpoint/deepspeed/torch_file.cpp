#include "zerotrain/checkpoint/deepspeed/torch_file.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {

TorchFile::TorchFile(std::filesystem::path path) : path_(std::move(path)) {
  const std::string name = path_.string();
  ZT_CHECK(std::filesystem::is_regular_file(path_), CheckpointError, name, ": no such file");
  try {
    zip_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(name);
  } catch (const std::exception& e) {
    throw CheckpointError(name +
                          ": not a torch.save zip archive (files saved with _use_new_zipfile_serialization="
                          "False are not read; load and save it again with torch.save): " +
                          std::string(e.what()).substr(0, 200));
  }
  ZT_CHECK(zip_->hasRecord("data.pkl"), CheckpointError, name, ": a zip without data.pkl, so not one torch.save wrote");
  auto [data, size] = zip_->getRecord("data.pkl");
  pickle_ = pickle::unpickle(std::string_view(static_cast<const char*>(data.get()), size), name);
  fd_ = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  ZT_CHECK(fd_ >= 0, IoError, "cannot open ", name, ": ", std::strerror(errno));
}

TorchFile::~TorchFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t TorchFile::storage_offset_bytes(const pickle::TensorRef& t, std::string_view what) const {
  const std::string record = "data/" + t.storage;
  ZT_CHECK(zip_->hasRecord(record), CheckpointError, path_.string(), ": ", what, ": its storage ", record,
           " is not in the archive");
  const auto bytes = static_cast<int64_t>(zip_->getRecordSize(record));
  ZT_CHECK(bytes == t.storage_numel * dtype_size(t.dtype), CheckpointError, path_.string(), ": ", what, ": storage ",
           record, " holds ", bytes, " bytes, not the ", t.storage_numel, " ", dtype_tag(t.dtype),
           " elements it claims");
  ZT_CHECK(t.contiguous(), CheckpointError, path_.string(), ": ", what, " is not contiguous in its storage");
  ZT_CHECK(t.offset >= 0 && t.offset + t.numel() <= t.storage_numel, CheckpointError, path_.string(), ": ", what,
           " reaches beyond its storage");
  return static_cast<int64_t>(zip_->getRecordOffset(record));
}

void TorchFile::pread_exact(int64_t offset, int64_t bytes, void* dst) const {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, out, static_cast<size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    ZT_CHECK(n > 0, IoError, "cannot read ", path_.string(), " at byte ", offset, ": ",
             n == 0 ? "the file ends early" : std::strerror(errno));
    out += n;
    offset += n;
    bytes -= n;
  }
}

void TorchFile::read_f32(const pickle::TensorRef& t, int64_t begin, int64_t count, float* dst,
                         std::string_view what) const {
  ZT_CHECK(is_floating(t.dtype), CheckpointError, path_.string(), ": ", what, " is ", dtype_tag(t.dtype),
           ", not floating point");
  ZT_CHECK(begin >= 0 && count >= 0 && begin + count <= t.numel(), CheckpointError, path_.string(), ": ", what, " has ",
           t.numel(), " elements; elements ", begin, "..", begin + count, " were asked for");
  const int64_t base = storage_offset_bytes(t, what), size = dtype_size(t.dtype);
  const int64_t first = base + (t.offset + begin) * size;
  if (t.dtype == Dtype::kF32) {
    pread_exact(first, count * 4, dst);
    return;
  }
  constexpr int64_t kPiece = 1 << 20;  // elements converted at a time
  std::vector<char> buffer(static_cast<size_t>(std::min(count, kPiece) * size));
  for (int64_t done = 0; done < count; done += kPiece) {
    const int64_t n = std::min(kPiece, count - done);
    pread_exact(first + done * size, n * size, buffer.data());
    convert_floats(buffer.data(), t.dtype, dst + done, Dtype::kF32, n);
  }
}

std::vector<char> TorchFile::read_bytes(const pickle::TensorRef& t, std::string_view what) const {
  const int64_t base = storage_offset_bytes(t, what), size = dtype_size(t.dtype);
  std::vector<char> out(static_cast<size_t>(t.numel() * size));
  pread_exact(base + t.offset * size, static_cast<int64_t>(out.size()), out.data());
  return out;
}

double TorchFile::read_scalar(const pickle::TensorRef& t, std::string_view what) const {
  ZT_CHECK(t.numel() == 1, CheckpointError, path_.string(), ": ", what, " has ", t.numel(), " elements, not 1");
  const std::vector<char> b = read_bytes(t, what);
  switch (t.dtype) {
    case Dtype::kI64: {
      int64_t v;
      std::memcpy(&v, b.data(), 8);
      return static_cast<double>(v);
    }
    case Dtype::kI32: {
      int32_t v;
      std::memcpy(&v, b.data(), 4);
      return v;
    }
    case Dtype::kF64: {
      double v;
      std::memcpy(&v, b.data(), 8);
      return v;
    }
    default: {
      float v = 0;
      read_f32(t, 0, 1, &v, what);
      return v;
    }
  }
}

}  // namespace zerotrain::checkpoint
