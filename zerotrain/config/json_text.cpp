#include "zerotrain/config/json_text.h"

#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain::config {
namespace {

// Blanks out trailing commas (a comma whose next token is `}` or `]`), leaving every other
// byte, and so every line and column, where it was. Strings and comments are skipped over.
std::string blank_trailing_commas(std::string_view text) {
  std::string out(text);
  size_t pending_comma = std::string::npos;
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (c == '"') {
      pending_comma = std::string::npos;
      for (++i; i < out.size() && out[i] != '"'; ++i) {
        if (out[i] == '\\') ++i;
      }
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      size_t end = out.find("*/", i + 2);
      i = (end == std::string::npos) ? out.size() : end + 1;
    } else if (c == ',') {
      pending_comma = i;
    } else if (c == '}' || c == ']') {
      if (pending_comma != std::string::npos) out[pending_comma] = ' ';
      pending_comma = std::string::npos;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      pending_comma = std::string::npos;
    }
  }
  return out;
}

// The bytes of a binary file ("last read: '...'") as text a terminal shows safely.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* kHex = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string line_and_column(std::string_view text, size_t byte_offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < byte_offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return detail::str("line ", line, ", column ", column);
}

// Builds the DOM like nlohmann's own parser, but remembers where it is so that a repeated
// key can be reported by its JSON path instead of silently keeping the last value.
class DomBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit DomBuilder(std::string_view text) : text_(text) {}

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool v) override { return add(Json(v)); }
  bool number_integer(number_integer_t v) override { return add(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return add(Json(v)); }
  bool string(string_t& v) override { return add(Json(v)); }
  bool binary(binary_t&) override { return add(Json(nullptr)); }

  bool start_object(std::size_t) override { return open(Json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    Frame& top = stack_.back();
    if (top.value.contains(k)) duplicates_.push_back(path_of(k));
    top.key = k;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    // or "[json.exception.out_of_range.406] number overflow ...": keep the reason and say
    // where, in our own words.
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) {
      what = what.substr(what.find("] ") + 2);
    }
    auto colon = what.rfind("parse error", 0) == 0 ? what.find(": ") : std::string::npos;
    std::string reason = printable(colon == std::string::npos ? what : what.substr(colon + 2));
    error_ = detail::str("invalid JSON at ", line_and_column(text_, position == 0 ? 0 : position - 1),
                         ": ", reason);
    return false;
  }

  Json take_result() { return std::move(result_); }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  struct Frame {
    Json value;
    std::string key;   // the key whose value comes next (objects only)
  };

  std::string path_of(const std::string& leaf) const {
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (i + 1 == stack_.size()) break;
      path += f.value.is_array() ? "[" + std::to_string(f.value.size()) + "]" : (path.empty() ? "" : ".") + f.key;
    }
    return path.empty() ? leaf : path + "." + leaf;
  }

  bool add(Json v) {
    if (stack_.empty()) {
      result_ = std::move(v);
    } else if (stack_.back().value.is_array()) {
      stack_.back().value.push_back(std::move(v));
    } else {
      stack_.back().value[stack_.back().key] = std::move(v);
    }
    return true;
  }
  bool open(Json container) {
    // Everything that walks a Json (dump, destruction, the schema's block readers) recurses
    // once per level; the bound keeps a hostile file from overflowing the stack.
    if (stack_.size() >= kMaxJsonDepth) {
      error_ = detail::str("nested deeper than ", kMaxJsonDepth, " levels; a DeepSpeed config is a few levels deep",
                           " (is it the right file?)");
      return false;
    }
    stack_.push_back({std::move(container), {}});
    return true;
  }
  bool close() {
    Json done = std::move(stack_.back().value);
    stack_.pop_back();
    return add(std::move(done));
  }

  std::string_view text_;
  std::vector<Frame> stack_;
  Json result_;
  std::string error_;
  std::vector<std::string> duplicates_;
};

}  // namespace

Json parse_json_text(std::string_view text, std::string_view origin) {
  ZT_CHECK(static_cast<int64_t>(text.size()) <= kMaxJsonBytes, ConfigError, origin, ": ", text.size(),
           " bytes of JSON, more than the ", kMaxJsonBytes, " a config may have; is it the right file?");
  std::string cleaned = blank_trailing_commas(text);
  DomBuilder builder(cleaned);
  bool ok = Json::sax_parse(cleaned, &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/true);
  ZT_CHECK(ok, ConfigError, origin, ": ", builder.error());
  ZT_CHECK(builder.duplicates().empty(), ConfigError, origin, ": duplicate keys (JSON keeps only one of each; ",
           "remove the extra): ", strings::join_words(builder.duplicates(), " and "));
  return builder.take_result();
}

Json read_json_file(const std::filesystem::path& path) {
  auto file = files::read_text_file(path, {.what = "config file", .max_bytes = kMaxJsonBytes});
  ZT_CHECK(file.text, ConfigError, path.string(), ": cannot read the config file: ", file.problem);
  return parse_json_text(*file.text, path.string());
}

}  // namespace zerotrain::config
