#include "zerotrain/core/text_file.h"

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"

namespace zerotrain::files {

TextFile read_text_file(const std::filesystem::path& path, const TextFileOptions& options) {
  auto too_large = [&](int64_t bytes) {
    return detail::str("is ", bytes, " bytes, more than the ", options.max_bytes, " bytes a ", options.what,
                       " may have; is it the right file?");
  };
  try {
    InputFile file(path, {.what = options.what});
    if (file.size() > options.max_bytes) return {std::nullopt, too_large(file.size())};
    std::string text = file.read_all(options.max_bytes);
    if (static_cast<int64_t>(text.size()) > options.max_bytes) {
      return {std::nullopt, too_large(static_cast<int64_t>(text.size()))};
    }
    return {std::move(text), {}};
  } catch (const ReadError& e) {
    // The caller names the file and picks the error type (ConfigError, UsageError ...).
    return {std::nullopt, e.problem()};
  }
}

}  // namespace zerotrain::files
