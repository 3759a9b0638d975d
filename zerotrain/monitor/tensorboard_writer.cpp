#include "zerotrain/monitor/tensorboard_writer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/monitor/append_file.h"
#include "zerotrain/monitor/crc32c.h"

namespace zerotrain::monitor {
namespace tensorboard {
namespace {

// Protocol-buffer wire format: each field is a varint key (field number << 3 | wire type)
// and a value. Only the four wire types the Event messages use.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

template <class T>
void put_little_endian(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_int64(std::string& out, uint32_t field, int64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(value));   // negative: ten bytes, as protobuf does
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

}  // namespace

std::string encode_file_version_event(double wall_time_s) {
  std::string event;
  put_double(event, 1, wall_time_s);
  put_bytes(event, 3, kFileVersion);
  return event;
}

std::string encode_scalars_event(double wall_time_s, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_float(value, 2, static_cast<float>(s.value));
    put_bytes(summary, 1, value);
  }
  std::string event;
  put_double(event, 1, wall_time_s);
  put_int64(event, 2, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string encode_record(std::string_view data) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record.append(data);
  put_little_endian(record, masked_crc32c(data));
  return record;
}

std::string event_file_name(int64_t unix_s, std::string_view hostname, int64_t pid) {
  return detail::str("events.out.tfevents.", unix_s, ".", hostname, ".", pid);
}

}  // namespace tensorboard

namespace {

double wall_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

class TensorboardWriter final : public Writer {
 public:
  explicit TensorboardWriter(const std::filesystem::path& dir) : dir_(dir) {
    create_directories(dir, "TensorBoard");
    const double now_s = wall_time_s();
    // A second writer of this process in the same second gets a numbered name, not the
    // first one's file.
    static std::atomic<int> writers_made{0};
    std::string name = tensorboard::event_file_name(static_cast<int64_t>(now_s), hostname(), ::getpid());
    if (const int n = writers_made++; n > 0) name += "." + std::to_string(n);
    file_ = std::make_unique<AppendFile>(dir / name, AppendFile::Mode::kCreateNew);
    file_->write(tensorboard::encode_record(tensorboard::encode_file_version_event(now_s)));
  }

  void write(int64_t step, const std::vector<Scalar>& scalars) override {
    file_->write(tensorboard::encode_record(tensorboard::encode_scalars_event(wall_time_s(), step, scalars)));
  }
  void flush() override { file_->sync(); }
  // The folder, which `tensorboard --logdir` is given.
  std::string where() const override { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<AppendFile> file_;
};

}  // namespace

std::unique_ptr<Writer> make_tensorboard_writer(const std::string& dir) {
  return std::make_unique<TensorboardWriter>(dir);
}

}  // namespace zerotrain::monitor
