// A JSON Lines corpus read line by line, in bounded memory (docs/finetune.md, "Data: JSONL
// and text"). Each line is one JSON object, either
//
//   {"text": "..."}                          trained on whole
//   {"prompt": "...", "completion": "..."}   trained on the completion only
//
// Other fields are ignored. A line of only whitespace is skipped; a UTF-8 byte-order mark at
// the start of the file (or of a line: files concatenated) is skipped; a line may end in
// "\r\n". Everything else is an IoError naming the file, the line (counted from 1) and the
// fix: a line that is not JSON or not an object, that has neither form, both forms, or a field
// that is not a string, ill-formed UTF-8
// (refused, not replaced: a corpus that is not UTF-8 should be re-encoded, not guessed at), a
// duplicate key, or a line longer than max_line_bytes (stopped there: the rest of the line is
// never read).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "zerotrain/data/tokenized/document.h"

namespace zerotrain::data::tokenized {

inline constexpr int64_t kDefaultMaxLineBytes = int64_t{256} << 20;   // 256 MiB

struct JsonlOptions {
  int64_t max_line_bytes = kDefaultMaxLineBytes;   // without its newline
};

// Calls `on_document` with each document of `path`, in file order; returns how many there were.
int64_t read_jsonl(const std::filesystem::path& path, const std::function<void(Document&&)>& on_document,
                   const JsonlOptions& options = {});

// One line (without its newline) of `source`, line `line_number`: std::nullopt for a line of
// only whitespace. Throws the IoError read_jsonl would.
std::optional<Document> parse_jsonl_line(std::string_view line, int64_t line_number, const std::string& source);

}  // namespace zerotrain::data::tokenized
