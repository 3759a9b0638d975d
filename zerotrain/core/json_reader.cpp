#include "zerotrain/core/json_reader.h"

#include <cctype>
#include <cmath>
#include <unordered_set>
#include <utility>
#include <vector>

#include "zerotrain/core/strings.h"

namespace zerotrain::json {
namespace {

// A repeated key is named in the message; past this many the rest are counted.
constexpr size_t kMaxNamedDuplicates = 10;

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
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Builds the DOM like nlohmann's own parser, but remembers where it is, so that a repeated
// key is reported by its JSON path instead of silently keeping the last value, and so that
// nesting stops at the bound before anything recurses.
class DomBuilder : public nlohmann::json_sax<Json> {
 public:
  DomBuilder(std::string_view text, const ReadOptions& options) : text_(text), options_(options) {}

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool v) override { return add(Json(v)); }
  bool number_integer(number_integer_t v) override { return add(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(Json(v)); }
  bool number_float(number_float_t v, const string_t& text) override {
    // nlohmann refuses a literal that overflows already; kept so that no reader can ever
    // hand on an infinity or a NaN, whatever the parser's version does.
    if (!std::isfinite(v)) {
      error_ = "the number " + printable(text) + " is not finite";
      return false;
    }
    return add(Json(v));
  }
  bool string(string_t& v) override { return add(Json(v)); }
  bool binary(binary_t&) override { return add(Json(nullptr)); }

  bool start_object(std::size_t) override { return open(Json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    Frame& top = stack_.back();
    top.key_repeated = !top.keys.insert(k).second;
    if (top.key_repeated) {
      if (duplicates_.size() < kMaxNamedDuplicates) duplicates_.push_back(path_of(k));
      ++duplicate_count_;
    }
    top.key = k;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    // or "[json.exception.out_of_range.406] number overflow ...": keep the reason and say
    // where, in our own words.
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) {
      what = what.substr(what.find("] ") + 2);
    }
    auto colon = what.rfind("parse error", 0) == 0 ? what.find(": ") : std::string::npos;
    std::string reason = printable(colon == std::string::npos ? what : what.substr(colon + 2));
    error_ = "invalid JSON at " + line_and_column(text_, position == 0 ? 0 : position - 1) + ": " + reason;
    return false;
  }

  Json take_result() { return std::move(result_); }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& duplicates() const { return duplicates_; }
  size_t duplicate_count() const { return duplicate_count_; }

 private:
  struct Frame {
    Json value;
    std::string key;                        // the key whose value comes next (objects only)
    bool key_repeated = false;
    std::unordered_set<std::string> keys;   // seen so far (objects only): O(1) per key, not a scan
  };

  std::string path_of(const std::string& leaf) const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      path += f.value.is_array() ? "[" + std::to_string(f.value.size()) + "]" : (path.empty() ? "" : ".") + f.key;
    }
    return path.empty() ? leaf : path + "." + leaf;
  }

  bool add(Json v) {
    if (stack_.empty()) {
      result_ = std::move(v);
      return true;
    }
    Frame& top = stack_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(v));
    } else if (!top.key_repeated) {
      // The key is new (checked above), so it is appended without ordered_map's linear
      // search for it: an object of many keys costs linear time, not quadratic.
      auto& entries = top.value.get_ref<Json::object_t&>();
      static_cast<Json::object_t::Container&>(entries).emplace_back(top.key, std::move(v));
    }
    // A repeated key's value is dropped: the text is refused once parsing ends.
    return true;
  }
  bool open(Json container) {
    // Everything that walks a Json (dump, destruction, the readers of each format) recurses
    // once per level; the bound keeps a hostile file from overflowing the stack.
    if (stack_.size() >= options_.max_depth) {
      error_ = "nested deeper than " + std::to_string(options_.max_depth) + " levels; " + std::string(options_.what) +
               " is a few levels deep (is it the right file?)";
      return false;
    }
    stack_.push_back({std::move(container), {}, false, {}});
    return true;
  }
  bool close() {
    Json done = std::move(stack_.back().value);
    stack_.pop_back();
    return add(std::move(done));
  }

  std::string_view text_;
  const ReadOptions& options_;
  std::vector<Frame> stack_;
  Json result_;
  std::string error_;
  std::vector<std::string> duplicates_;
  size_t duplicate_count_ = 0;
};

}  // namespace

ReadResult read_json_text(std::string_view text, const ReadOptions& options) {
  ReadResult out;
  if (static_cast<int64_t>(text.size()) > options.max_bytes) {
    out.problem = std::to_string(text.size()) + " bytes of JSON, more than the " + std::to_string(options.max_bytes) +
                  " " + std::string(options.what) + " may have; is it the right file?";
    return out;
  }
  std::string cleaned;
  if (options.comments_and_trailing_commas) {
    cleaned = blank_trailing_commas(text);
    text = cleaned;
  }
  DomBuilder builder(text, options);
  const bool ok = Json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, /*strict=*/true,
                                  /*ignore_comments=*/options.comments_and_trailing_commas);
  if (!ok) {
    out.problem = builder.error().empty() ? "invalid JSON" : builder.error();
    return out;
  }
  if (builder.duplicate_count() > 0) {
    std::string named = strings::join_words(builder.duplicates(), " and ");
    if (builder.duplicate_count() > builder.duplicates().size()) {
      named += " (and " + std::to_string(builder.duplicate_count() - builder.duplicates().size()) + " more)";
    }
    out.problem = "duplicate keys (JSON keeps only one of each; remove the extra): " + named;
    return out;
  }
  out.value = builder.take_result();
  return out;
}

}  // namespace zerotrain::json
