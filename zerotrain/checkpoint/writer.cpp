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
  for (const auto& t : tensors) n += t.nbytes();
  return n;
}

void for_each_piece(const TensorSource& source, const std::function<void(const void*, int64_t)>& f) {
  const int64_t bytes = source.nbytes();
  if (!source.is_read()) {
    f(source.data, bytes);
    return;
  }
  std::vector<char> buffer(static_cast<size_t>(std::min(bytes, kReadPieceBytes)));
  for (int64_t done = 0; done < bytes;) {
    const int64_t n = std::min(kReadPieceBytes, bytes - done);
    source.read(done, n, buffer.data());
    f(buffer.data(), n);
    done += n;
  }
}

namespace {

std::vector<TensorEntry> entries_of(const std::vector<TensorSource>& tensors) {
  std::vector<TensorEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) entries.push_back({t.key, t.dtype, t.shape, 0, 0});
  return entries;
}

uint64_t checksum_of(const TensorSource& t) {   // XXH3's streamed digest is its one-shot digest
  Checksum sum;
  for_each_piece(t, [&](const void* data, int64_t n) { sum.update(data, n); });
  return sum.digest();
}

void checksum_into(std::map<std::string, std::string>& metadata, const std::vector<TensorSource>& tensors,
                   bool placeholder) {
  for (const auto& t : tensors) {
    metadata[std::string(kTensorChecksumPrefix) + t.key] = to_hex(placeholder ? 0 : checksum_of(t));
  }
}

}  // namespace

PreparedFile prepare_safetensors(std::vector<TensorSource> tensors, std::map<std::string, std::string> metadata,
                                 TensorChecksums checksums) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorSource& a, const TensorSource& b) { return dtype_size(a.dtype) > dtype_size(b.dtype); });
  if (checksums != TensorChecksums::kNone) checksum_into(metadata, tensors, checksums == TensorChecksums::kLater);
  PreparedFile f;
  std::vector<TensorEntry> entries = entries_of(tensors);
  f.header = encode_safetensors_header(entries, metadata);
  f.tensors = std::move(tensors);
  f.metadata = std::move(metadata);
  f.checksums_pending = checksums == TensorChecksums::kLater;
  return f;
}

void fill_tensor_checksums(PreparedFile& file) {
  if (!file.checksums_pending) return;
  checksum_into(file.metadata, file.tensors, false);
  std::vector<TensorEntry> entries = entries_of(file.tensors);
  std::string header = encode_safetensors_header(entries, file.metadata);
  // The hex of a checksum is fixed-width: the size counted for the room check stays right.
  ZT_INTERNAL_ASSERT(header.size() == file.header.size(), "a checkpoint header changed size when its checksums were filled in");
  file.header = std::move(header);
  file.checksums_pending = false;
}

WrittenFile write_safetensors(const std::filesystem::path& path, const PreparedFile& file) {
  ZT_INTERNAL_ASSERT(!file.checksums_pending, "a checkpoint file written before its checksums were filled in");
  AtomicFile out(path);
  out.write(file.header);
  for (const auto& t : file.tensors) for_each_piece(t, [&](const void* data, int64_t n) { out.write(data, n); });
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
