#include "zerotrain/checkpoint/writer.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

int64_t PreparedFile::bytes() const {
  int64_t n = static_cast<int64_t>(header.size());
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    n += numel * dtype_size(t.dtype);
  }
  return n;
}

PreparedFile prepare_safetensors(std::vector<TensorSource> tensors, std::map<std::string, std::string> metadata,
                                 bool tensor_checksums) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorSource& a, const TensorSource& b) { return dtype_size(a.dtype) > dtype_size(b.dtype); });
  std::vector<TensorEntry> entries;
  for (const auto& t : tensors) {
    TensorEntry e{t.key, t.dtype, t.shape, 0, 0};
    if (tensor_checksums) {
      metadata[std::string(kTensorChecksumPrefix) + t.key] = to_hex(checksum_of(t.data, e.numel() * dtype_size(t.dtype)));
    }
    entries.push_back(std::move(e));
  }
  PreparedFile f;
  f.header = encode_safetensors_header(entries, metadata);
  f.tensors = std::move(tensors);
  return f;
}

WrittenFile write_safetensors(const std::filesystem::path& path, const PreparedFile& file) {
  AtomicFile out(path);
  out.write(file.header);
  for (const auto& t : file.tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    out.write(t.data, numel * dtype_size(t.dtype));
  }
  const WrittenFile w{out.bytes_written(), out.checksum(),
                      checksum_of(file.header.data(), static_cast<int64_t>(file.header.size()))};
  out.commit();
  return w;
}

void check_room(const std::filesystem::path& dir, int64_t bytes, int64_t largest_file, const RoomFor& room) {
  const std::string after = room.untouched.empty() ? std::string() : "; " + std::string(room.untouched);
  struct statvfs fs {};
  ZT_CHECK(::statvfs(dir.c_str(), &fs) == 0, IoError, "cannot inspect the file system of ", dir.string(), ": ",
           std::strerror(errno));
  const auto free_bytes = static_cast<int64_t>(std::min<unsigned long long>(
      static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize, static_cast<unsigned long long>(INT64_MAX)));
  ZT_CHECK(free_bytes >= bytes, IoError, "not enough disk space for ", room.what, " in ", dir.string(), ": it needs ",
           format_bytes(bytes), ", ", format_bytes(free_bytes), " are free. Free space or write elsewhere", after);
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    ZT_CHECK(static_cast<unsigned long long>(largest_file) <= lim.rlim_cur, IoError,
             "the file-size limit (ulimit -f) is ", format_bytes(static_cast<int64_t>(lim.rlim_cur)),
             " but a file of ", room.what, " is ", format_bytes(largest_file),
             "; raise the limit (ulimit -f unlimited)", after);
  }
}

}  // namespace zerotrain::checkpoint
