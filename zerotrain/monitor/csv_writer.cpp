#include "zerotrain/monitor/csv_writer.h"

#include <charconv>
#include <filesystem>
#include <map>
#include <memory>

#include "zerotrain/core/error.h"
#include "zerotrain/monitor/append_file.h"
#include "zerotrain/monitor/monitor.h"

namespace zerotrain::monitor {
namespace csv {

std::string file_name(std::string_view tag) {
  std::string name(tag);
  for (char& ch : name) {
    if (ch == '/' || ch == ' ') ch = '_';
  }
  return name + ".csv";
}

std::string header(std::string_view tag) {
  const size_t slash = tag.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? tag : tag.substr(slash + 1);
  if (name.find_first_of(",\"\r\n") == std::string_view::npos) return detail::str("step,", name, "\n");
  // Quoted as Python's csv module (DeepSpeed's writer) and RFC 4180 do: quotes doubled.
  std::string quoted = "\"";
  for (const char ch : name) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return detail::str("step,", quoted, "\"\n");
}

std::string format_value(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  ZT_INTERNAL_ASSERT(result.ec == std::errc(), "to_chars of a double needs at most 24 characters");
  return std::string(text, result.ptr);
}

}  // namespace csv

namespace {

class CsvWriter final : public Writer {
 public:
  explicit CsvWriter(std::filesystem::path dir) : dir_(std::move(dir)) { create_directories(dir_, "CSV metrics"); }

  void write(int64_t step, const std::vector<Scalar>& scalars) override {
    for (const Scalar& s : scalars) {
      ZT_CHECK(!s.tag.empty(), UsageError, "a metric with an empty tag at step ", step,
               "; give every logged value a name such as \"train/loss\"");
      file_for(s.tag).write(detail::str(step, ",", csv::format_value(s.value), "\n"));
    }
  }

  void flush() override {
    for (auto& [tag, file] : files_) file->sync();
  }

  std::string where() const override { return dir_.string(); }

 private:
  // Opened on a tag's first value and kept open (a run logs a handful of tags). The header
  // goes into a new or empty file only: a resumed run appends rows under the old header.
  AppendFile& file_for(const std::string& tag) {
    auto it = files_.find(tag);
    if (it == files_.end()) {
      auto file = std::make_unique<AppendFile>(dir_ / csv::file_name(tag));
      if (file->size_bytes() == 0) file->write(csv::header(tag));
      it = files_.emplace(tag, std::move(file)).first;
    }
    return *it->second;
  }

  std::filesystem::path dir_;
  std::map<std::string, std::unique_ptr<AppendFile>> files_;
};

}  // namespace

std::unique_ptr<Writer> make_csv_writer(const std::string& dir) { return std::make_unique<CsvWriter>(dir); }

}  // namespace zerotrain::monitor
