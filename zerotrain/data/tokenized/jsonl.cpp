#include "zerotrain/data/tokenized/jsonl.h"

#include <cstring>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/json_reader.h"

namespace zerotrain::data::tokenized {
namespace {

constexpr int64_t kChunkBytes = int64_t{1} << 20;
constexpr std::string_view kBom = "\xEF\xBB\xBF";
constexpr std::string_view kForms =
    "each line must be a JSON object with a \"text\" string, or with \"prompt\" and \"completion\" strings";

bool blank(std::string_view line) {
  for (const char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

std::string where(const std::string& source, int64_t line_number) {
  return source + " line " + std::to_string(line_number);
}

const char* json_kind(const json::Json& value) {
  switch (value.type()) {
    case json::Json::value_t::null: return "null";
    case json::Json::value_t::boolean: return "a boolean";
    case json::Json::value_t::array: return "an array";
    case json::Json::value_t::object: return "an object";
    case json::Json::value_t::string: return "a string";
    default: return "a number";
  }
}

// The string field `key` of `object`, which has it.
std::string string_field(const json::Json& object, const char* key, const std::string& source, int64_t line_number) {
  const json::Json& value = object.at(key);
  ZT_CHECK(value.is_string(), IoError, where(source, line_number), ": \"", key, "\" is ", json_kind(value),
           ", not a string; ", kForms);
  return value.get<std::string>();
}

}  // namespace

std::optional<Document> parse_jsonl_line(std::string_view line, int64_t line_number, const std::string& source) {
  if (blank(line)) return std::nullopt;
  json::ReadOptions read_options;
  read_options.max_bytes = static_cast<int64_t>(line.size());   // the line's length was checked by the reader
  read_options.what = "a JSONL line";
  json::ReadResult read = json::read_json_text(line, read_options);
  if (!read.ok()) {
    std::string problem = std::move(read.problem);
    // nlohmann quotes what it read last; a long line's string must not flood the message.
    if (problem.size() > 300) problem = problem.substr(0, 300) + "...";
    const bool encoding = problem.find("UTF-8") != std::string::npos;
    throw IoError(where(source, line_number) + " is not valid JSON: " + problem + "; " +
                  (encoding ? std::string("the file must be UTF-8: re-encode it (iconv -f <its encoding> -t UTF-8)")
                            : std::string(kForms) + ", one object per line"));
  }
  const json::Json& object = read.value;
  ZT_CHECK(object.is_object(), IoError, where(source, line_number), " is ", json_kind(object), ", not an object; ",
           kForms);
  const bool has_text = object.contains("text");
  const bool has_prompt = object.contains("prompt");
  const bool has_completion = object.contains("completion");
  if (has_text) {
    ZT_CHECK(!has_prompt && !has_completion, IoError, where(source, line_number), " has both \"text\" and \"",
             has_prompt ? "prompt" : "completion", "\"; ", kForms,
             " (not both: split it, or rename \"text\" if it is not meant to be trained on whole)");
    return Document{.prompt = {}, .text = string_field(object, "text", source, line_number), .line = line_number};
  }
  if (has_prompt || has_completion) {
    ZT_CHECK(has_prompt && has_completion, IoError, where(source, line_number), " has \"",
             has_prompt ? "prompt" : "completion", "\" but no \"", has_prompt ? "completion" : "prompt", "\"; ",
             kForms);
    return Document{.prompt = string_field(object, "prompt", source, line_number),
                    .text = string_field(object, "completion", source, line_number),
                    .line = line_number};
  }
  std::string keys;
  for (const auto& [key, value] : object.items()) {
    if (keys.size() > 200) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "\"" : ", \"") + key + "\"";
  }
  throw IoError(where(source, line_number) + " has neither \"text\" nor \"prompt\" and \"completion\" (its keys: " +
                (keys.empty() ? std::string("none") : keys) + "); " + std::string(kForms) +
                (object.contains("messages") ? "; chat \"messages\" are not read: render each conversation to "
                                               "\"prompt\"/\"completion\" or \"text\" with its chat template first"
                                             : ""));
}

int64_t read_jsonl(const std::filesystem::path& path, const std::function<void(Document&&)>& on_document,
                   const JsonlOptions& options) {
  ZT_CHECK(options.max_line_bytes >= 1, UsageError, "max_line_bytes is ", options.max_line_bytes,
           "; it must be at least 1");
  files::InputFile file(path, {.what = "JSONL file"});
  const std::string source = path.string();
  std::vector<char> chunk(static_cast<size_t>(kChunkBytes));
  std::string line;
  int64_t line_number = 1;
  int64_t documents = 0;
  auto finish_line = [&] {
    std::string_view text = line;
    if (line_number == 1 && text.starts_with(kBom)) text.remove_prefix(kBom.size());
    if (std::optional<Document> document = parse_jsonl_line(text, line_number, source)) {
      on_document(std::move(*document));
      ++documents;
    }
    line.clear();
    ++line_number;
  };
  for (;;) {
    const int64_t got = file.read_up_to(chunk.data(), kChunkBytes);
    if (got == 0) break;
    const char* begin = chunk.data();
    const char* const end = begin + got;
    while (begin < end) {
      const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', static_cast<size_t>(end - begin)));
      const char* stop = newline ? newline : end;
      const auto piece = static_cast<int64_t>(stop - begin);
      // Checked before appending, so a line without newlines (a binary file, one huge JSON
      // document) costs at most the limit in memory and is never read to its end.
      if (static_cast<int64_t>(line.size()) + piece > options.max_line_bytes) {
        const int64_t mib = options.max_line_bytes >> 20;
        throw IoError(where(source, line_number) + " is longer than the limit of " +
                      std::to_string(options.max_line_bytes) + " bytes" +
                      (mib > 0 ? " (" + std::to_string(mib) + " MiB)" : std::string()) + ": " +
                      std::to_string(static_cast<int64_t>(line.size()) + piece) +
                      " bytes read without a newline; a JSONL file holds one JSON object per line (is it "
                      "pretty-printed JSON, or not text at all?), or raise max_line_bytes for documents this long");
      }
      line.append(begin, static_cast<size_t>(piece));
      if (!newline) break;
      finish_line();
      begin = newline + 1;
    }
  }
  if (!line.empty()) finish_line();   // the last line needs no newline
  return documents;
}

}  // namespace zerotrain::data::tokenized
