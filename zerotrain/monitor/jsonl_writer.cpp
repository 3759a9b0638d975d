#include "zerotrain/monitor/jsonl_writer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "zerotrain/monitor/append_file.h"

namespace zerotrain::monitor {
namespace jsonl {

std::string format_line(int64_t step, const std::vector<Scalar>& scalars) {
  nlohmann::ordered_json line;   // "step" first, then the tags as logged
  line["step"] = step;
  for (const Scalar& s : scalars) line[s.tag] = s.value;
  // A tag that is not valid UTF-8 gets U+FFFD rather than losing the line to an exception.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace jsonl

namespace {

class JsonlWriter final : public Writer {
 public:
  explicit JsonlWriter(const std::filesystem::path& path) {
    if (path.has_parent_path()) create_directories(path.parent_path(), "JSON-lines metrics");
    file_ = std::make_unique<AppendFile>(path);
  }

  void write(int64_t step, const std::vector<Scalar>& scalars) override {
    file_->write(jsonl::format_line(step, scalars));
  }
  void flush() override { file_->sync(); }
  std::string where() const override { return file_->path().string(); }

 private:
  std::unique_ptr<AppendFile> file_;
};

}  // namespace

std::unique_ptr<Writer> make_jsonl_writer(const std::string& path) { return std::make_unique<JsonlWriter>(path); }

}  // namespace zerotrain::monitor
