// A file that a run writes as it goes (the metrics of `zerotrain train`): every write is
// checked, and close() makes the data durable and reports what the disk said, so a full
// or read-only device is an IoError with the path and the reason instead of lost lines.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "zerotrain/core/output_path.h"

namespace zerotrain::files {

// Flushes std::cout and stdout and checks that everything printed was written: output that
// could not be written (a full disk, a closed pipe) is an IoError, not a success that
// printed nothing. Commands call it before they exit 0.
void check_standard_output();

class OutputFile {
 public:
  // Creates or truncates `path` under the output policy (core/output_path.h): a FIFO, a
  // device, a link or an input of the run is refused, and so is a non-empty file unless
  // `check.may_replace`. `check.what` names it in messages ("--metrics_file").
  OutputFile(std::filesystem::path path, const OutputCheck& check);
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
