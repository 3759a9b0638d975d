#include "zerotrain/data/idx.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"

namespace zerotrain::data {
namespace {

namespace fs = std::filesystem;

std::string hex32(uint32_t v) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// zlib's gz reader on a files::InputFile: reads gzip-compressed and plain files alike, and
// a failed read is the same ReadError as anywhere else.
class GzFile {
 public:
  explicit GzFile(const fs::path& path) : file_(path, {.what = "file in the IDX format (optionally .gz)"}) {
    // zlib closes the descriptor it is given; the InputFile keeps its own.
    const int fd = ::fcntl(file_.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) file_.fail_read(errno, 0);
    gz_ = gzdopen(fd, "rb");
    if (gz_ == nullptr) {
      ::close(fd);
      throw ResourceError(path.string() + ": out of memory for the gzip reader");
    }
    gzbuffer(gz_, 1 << 20);
  }
  ~GzFile() { gzclose(gz_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Up to `bytes` bytes; fewer only at the end of the data.
  int64_t read(void* out, int64_t bytes) {
    int64_t done = 0;
    while (done < bytes) {
      const auto chunk = static_cast<unsigned>(std::min<int64_t>(bytes - done, 1 << 30));
      errno = 0;
      const int got = gzread(gz_, static_cast<char*>(out) + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* why = gzerror(gz_, &code);
        if (code == Z_ERRNO && errno != 0) file_.fail_read(errno, gzoffset(gz_));
        throw IoError(file_.path().string() + ": cannot be read: " + why +
                      (code == Z_ERRNO ? "" : " (a damaged gzip file?)"));
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }
  bool compressed() { return gzdirect(gz_) == 0; }

 private:
  files::InputFile file_;
  gzFile gz_ = nullptr;
};

}  // namespace

at::Tensor read_idx_uint8(const fs::path& path, int64_t dims) {
  GzFile file(path);
  const std::string name = path.string();
  const uint32_t expected_magic = 0x00000800u | static_cast<uint32_t>(dims);
  unsigned char magic[4];
  const int64_t got = file.read(magic, 4);
  const bool gz = file.compressed();
  const std::string size_kind = gz ? " (decompressed)" : "";
  ZT_CHECK(got == 4, IoError, name, ": ", got, " bytes", size_kind, ", too short for the 4-byte IDX magic number ",
           hex32(expected_magic));
  const uint32_t found = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) | (uint32_t{magic[2]} << 8) | magic[3];
  ZT_CHECK(found == expected_magic, IoError, name, ": not a uint8 IDX file of ", dims,
           " dimension(s): magic number ", hex32(found), ", expected ", hex32(expected_magic),
           dims == 3 ? " (images: count, rows, columns)" : dims == 1 ? " (labels: count)" : "",
           found == 0x00000801u || found == 0x00000803u ? "; are the image and label files swapped?" : "");

  std::vector<unsigned char> header(static_cast<size_t>(4 * dims));
  const int64_t header_got = file.read(header.data(), 4 * dims);
  ZT_CHECK(header_got == 4 * dims, IoError, name, ": truncated: the header stops after ", 4 + header_got, " bytes",
           size_kind, ", expected ", 4 + 4 * dims, " (the magic number and ", dims, " dimension(s))");
  std::vector<int64_t> shape;
  int64_t payload_bytes = 1;
  for (int64_t d = 0; d < dims; ++d) {
    const unsigned char* b = header.data() + 4 * d;
    const int64_t extent = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
    ZT_CHECK(extent == 0 || payload_bytes <= std::numeric_limits<int64_t>::max() / extent, IoError, name,
             ": the header's dimensions overflow a 64-bit size: not an IDX file");
    payload_bytes *= extent;
    shape.push_back(extent);
  }
  const int64_t header_bytes = 4 + 4 * dims;

  // Read in chunks rather than allocating what the header claims: a damaged header cannot
  // make us allocate more than the file holds.
  std::vector<unsigned char> payload;
  constexpr int64_t kChunkBytes = int64_t{16} << 20;
  while (static_cast<int64_t>(payload.size()) < payload_bytes) {
    const int64_t want = std::min<int64_t>(kChunkBytes, payload_bytes - static_cast<int64_t>(payload.size()));
    const size_t at = payload.size();
    payload.resize(at + static_cast<size_t>(want));
    const int64_t n = file.read(payload.data() + at, want);
    payload.resize(at + static_cast<size_t>(n));
    if (n < want) break;
  }
  std::string dims_text;
  for (size_t d = 0; d < shape.size(); ++d) dims_text += (d ? " x " : "") + std::to_string(shape[d]);
  const auto have = static_cast<int64_t>(payload.size());
  ZT_CHECK(have == payload_bytes, IoError, name, ": truncated: the header says ", dims_text, " = ", payload_bytes,
           " bytes of data after the ", header_bytes, "-byte header, the file", size_kind, " has ", have);
  unsigned char extra;
  ZT_CHECK(file.read(&extra, 1) == 0, IoError, name, ": longer than its header says: ", header_bytes, " + ",
           payload_bytes, " bytes (", dims_text, ") expected, then more bytes follow", size_kind,
           "; the file is damaged or not this format");

  at::Tensor out = at::empty(shape, at::kByte);
  if (payload_bytes > 0) std::memcpy(out.data_ptr<uint8_t>(), payload.data(), static_cast<size_t>(payload_bytes));
  return out;
}

std::shared_ptr<const ImageDataset> load_idx_pair(const fs::path& images_path, const fs::path& labels_path,
                                                  const std::string& name, int64_t classes) {
  ZT_CHECK(classes >= 1 && classes <= 256, UsageError, name, ": classes is ", classes,
           "; uint8 labels allow 1 to 256");
  const at::Tensor images = read_idx_uint8(images_path, 3);
  const at::Tensor labels8 = read_idx_uint8(labels_path, 1);
  const int64_t n = images.size(0);
  ZT_CHECK(n > 0, IoError, images_path.string(), ": holds no images (its count is 0)");
  ZT_CHECK(images.size(1) > 0 && images.size(2) > 0, IoError, images_path.string(), ": images of ", images.size(1),
           " x ", images.size(2), " pixels; rows and columns must be at least 1");
  ZT_CHECK(labels8.size(0) == n, IoError, labels_path.string(), ": ", labels8.size(0), " labels, but ",
           images_path.string(), " has ", n, " images; the two files must come from the same dataset and split");
  const uint8_t* label = labels8.const_data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    ZT_CHECK(label[i] < classes, IoError, labels_path.string(), ": sample ", i, " has label ", int{label[i]},
             ", expected one of 0..", classes - 1, " (", classes, " classes)");
  }
  return std::make_shared<const ImageDataset>(images.unsqueeze(1), labels8.to(at::kLong), classes, name);
}

}  // namespace zerotrain::data
