// The one way zerotrain reads a file that a user names (a dataset, a config, a hostfile, a
// checkpoint): whatever goes wrong, at open or at any read, is a files::ReadError, an IoError
// that names the file and says why in words ("is a directory", "cannot be read at byte 65536:
// Input/output error (EIO)"). Reading through a C++ stream instead turns a failed read into a
// stream exception with the library's words, or into a silently short file.
//
//   files::InputFile file(path, {.what = "text file"});
//   std::string text = file.read_all();
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>

#include "zerotrain/core/error.h"

namespace zerotrain::files {

// A file that cannot be opened or read. what(): "[io] <path>: <problem>".
class ReadError : public IoError {
 public:
  ReadError(std::filesystem::path path, std::string problem, int error_number);
  const std::filesystem::path& path() const { return path_; }
  // Why, without the path: "no such file", "is a directory; give the path of a text file".
  const std::string& problem() const { return problem_; }
  // The errno behind it; 0 where there is none (a directory, a file that shrank).
  int error_number() const { return error_number_; }

 private:
  std::filesystem::path path_;
  std::string problem_;
  int error_number_;
};

// strerror's words with the errno's name, so a message can be searched for either:
// "Input/output error (EIO)".
std::string describe_errno(int error_number);

// What a file that is not the regular file expected is, in words a user recognises:
// "is a directory", "is a FIFO (named pipe)", "is a character device", ...
std::string file_kind(mode_t mode);

// The pieces InputFile is made of, for a class that keeps its own descriptor (the checkpoint
// reader's ReadOnlyFile): the ReadError for a read of `path` that failed with `error_number`
// at byte `offset`, and exactly `nbytes` at `offset` of `fd`, a regular file that was
// `size_at_open` bytes (ending early is a ReadError too).
[[noreturn]] void throw_read_error(const std::filesystem::path& path, int error_number, int64_t offset);
void read_exactly_at(int fd, const std::filesystem::path& path, int64_t size_at_open, int64_t offset, void* out,
                     int64_t nbytes);

struct InputFileOptions {
  std::string_view what = "file";   // what the path should name, for the hint: "text file", "config file"
};

// A regular file open for reading. Opening never blocks (a FIFO is refused, not waited on)
// and refuses what is not a regular file, saying what it is.
class InputFile {
 public:
  explicit InputFile(std::filesystem::path path, const InputFileOptions& options = {});
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  InputFile& operator=(InputFile&&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int64_t size() const { return size_; }   // in bytes, when it was opened
  // The descriptor, for a library that reads it itself (zlib); report its read errors with
  // fail_read so they read like every other.
  int fd() const { return fd_; }

  // Up to `nbytes` from the current position; fewer only at the end of the file.
  int64_t read_up_to(void* out, int64_t nbytes);
  // Exactly `nbytes` at `offset` (the current position does not move); a file that ends
  // first is a ReadError, since its size was known when it was opened.
  void read_at(int64_t offset, void* out, int64_t nbytes) const;
  // From the current position to the end of the file, which may be longer or shorter than
  // size() (a file of /proc reports 0 bytes). Stops after max_bytes + 1 bytes, so a result
  // longer than max_bytes says the file is larger than the caller allows.
  std::string read_all(int64_t max_bytes = std::numeric_limits<int64_t>::max() - 1);

  // Throws the ReadError for a read that failed with `error_number` at byte `offset`.
  [[noreturn]] void fail_read(int error_number, int64_t offset) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t position_ = 0;
};

}  // namespace zerotrain::files
