// Reading a small text file that a user names (a config, a hostfile) safely: whatever the
// path turns out to be (a directory, a FIFO, /dev/zero, a symlink loop, a file of gigabytes),
// the read ends at once with a message that says what the path is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace zerotrain::files {

struct TextFileOptions {
  std::string_view what = "file";     // names the file in messages: "config file", "hostfile"
  int64_t max_bytes = 1 << 20;        // larger files are refused before they are read
};

// The file's text, or why it cannot be read as one: `problem` says what the path is
// ("is a directory", "is a FIFO (named pipe)", "no such file", "is 3.2 GB, ...").
// The caller turns a problem into its own error type (a config problem is a ConfigError,
// a hostfile problem a UsageError). Opening never blocks: a FIFO is refused, not waited on.
struct TextFile {
  std::optional<std::string> text;
  std::string problem;
};
TextFile read_text_file(const std::filesystem::path& path, const TextFileOptions& options = {});

}  // namespace zerotrain::files
