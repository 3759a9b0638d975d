// A metrics file opened for appending, written without user-space buffering (a reader such
// as TensorBoard sees every record at once, a crash loses no finished line), every write
// checked. core/output_file.h truncates; the monitors append, so that a resumed run goes on
// in the same CSV and JSON-lines files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace zerotrain::monitor {

class AppendFile {
 public:
  enum class Mode { kAppend, kCreateNew };   // kCreateNew: fail if the file exists
  AppendFile(std::filesystem::path path, Mode mode = Mode::kAppend);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void write(std::string_view bytes);
  void sync();   // fdatasync: durable on the device
  int64_t size_bytes() const { return size_bytes_; }   // including what was there before
  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail(const char* action, int error) const;
  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_bytes_ = 0;
};

// Creates `dir` and its parents; IoError naming it when that fails or it is not a folder.
void create_directories(const std::filesystem::path& dir, std::string_view what);

}  // namespace zerotrain::monitor
