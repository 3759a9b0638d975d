// A file that a run writes as it goes (the metrics of `zerotrain train`): every write is
// checked, and close() makes the data durable and reports what the disk said, so a full
// or read-only device is an IoError with the path and the reason instead of lost lines.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace zerotrain::files {

class OutputFile {
 public:
  // Creates or truncates `path`; `what` names it in messages ("--metrics_file").
  OutputFile(std::filesystem::path path, std::string what);
  ~OutputFile();   // closes without throwing; call close() to hear of errors
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes the whole text now (no buffering: a crash loses no finished line).
  void write(std::string_view text);
  // Flushes to the device (fdatasync) and closes; a deferred write error surfaces here.
  void close();

 private:
  [[noreturn]] void fail(const char* action, int error) const;
  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
};

}  // namespace zerotrain::files
