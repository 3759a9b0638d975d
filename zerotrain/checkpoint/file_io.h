// Files of a checkpoint on disk: written under a temporary name, fsync'd and renamed into
// place, with an XXH3-64 checksum of every byte; read by offset with every range checked
// against the file's size. No LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace zerotrain::checkpoint {

// XXH3-64 of a stream of bytes (libxxhash).
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* data, int64_t nbytes);
  uint64_t digest() const;

 private:
  void* state_;   // XXH3_state_t
};
uint64_t checksum_of(const void* data, int64_t nbytes);
std::string to_hex(uint64_t value);                        // 16 lowercase hex digits
bool from_hex(std::string_view text, uint64_t& value);     // exactly 16 hex digits

// A file written whole or not at all: bytes go to "<path>.tmp"; commit() fsyncs it, renames
// it to `path` and fsyncs the directory. Destroyed uncommitted, the temporary file is removed.
// Errors throw IoError naming the path and the cause (a full disk, a file-size limit).
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, int64_t nbytes);
  void write(std::string_view text) { write(text.data(), static_cast<int64_t>(text.size())); }
  void commit();
  int64_t bytes_written() const { return bytes_; }
  uint64_t checksum() const { return sum_.digest(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  Checksum sum_;
};

// What errno `err` means for a file being written, with the fix where there is one ("the disk
// is full (ENOSPC)", "the file system is read-only (EROFS)").
std::string write_error_cause(int err);

// Makes a rename or creation in `dir` durable.
void fsync_directory(const std::filesystem::path& dir);

// A regular file opened for reading by offset. Opening refuses what is not a regular file
// (CheckpointError naming it); every read is bounds-checked against the size at open.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(std::filesystem::path path);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Exactly `nbytes` at `offset`; CheckpointError if the range is outside the file or the
  // file shrank under us.
  void read_at(int64_t offset, void* out, int64_t nbytes) const;
  // The checksum of the whole file, read in blocks.
  uint64_t checksum() const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Test hook: called with the path and the byte count after each write of an AtomicFile, so
// a fault test can kill a real process in the middle of a save. Unset in production.
void set_write_observer(std::function<void(const std::filesystem::path&, int64_t)> observer);

}  // namespace zerotrain::checkpoint
