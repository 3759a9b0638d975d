#include "zerotrain/text/decoders.h"

#include "zerotrain/text/byte_level.h"
#include "zerotrain/text/normalizers.h"
#include "zerotrain/text/regex.h"
#include "zerotrain/text/utf8.h"

namespace zerotrain::text {
namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";   // U+FFFD

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// The byte-level alphabet back to bytes; a token with a character outside it is kept as it is.
// The bytes of all tokens together are then read as UTF-8, invalid stretches as U+FFFD.
class ByteLevelDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    std::string token_bytes;
    for (const std::string& token : tokens) {
      token_bytes.clear();
      bool in_alphabet = true;
      for (size_t at = 0; at < token.size() && in_alphabet;) {
        const int b = byte_level_byte(next_code_point(token, at));
        in_alphabet = b >= 0;
        token_bytes.push_back(static_cast<char>(b));
      }
      bytes += in_alphabet ? token_bytes : token;
    }
    return {to_valid_utf8(bytes)};
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) token = replace_all(*pattern_, token, content_);
    return tokens;
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become the text their bytes spell; a run that is not valid UTF-8
// becomes one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back(kReplacementChar);
      }
      bytes.clear();
    };
    for (std::string& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') byte = hex_byte(token[3], token[4]);
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    return out;
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char high, char low) {
    const int h = hex_digit(high), l = hex_digit(low);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    return {all};
  }
};

// Up to `start` leading and `stop` trailing copies of one character off each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      std::vector<size_t> starts;   // each character's byte offset
      std::vector<char32_t> chars;
      for (size_t at = 0; at < token.size();) {
        starts.push_back(at);
        chars.push_back(next_code_point(token, at));
      }
      starts.push_back(token.size());
      size_t first = 0;
      while (first < start_ && first < chars.size() && chars[first] == content_) ++first;
      size_t last = chars.size();
      for (size_t i = 0; i < stop_ && last > first && chars[last - 1] == content_; ++i) --last;
      token = token.substr(starts[first], starts[last] - starts[first]);
    }
    return tokens;
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// The replacement back to spaces; on the first token, when a prefix was prepended, the
// replacement is dropped instead.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepended)
      : replacement_(std::move(replacement)), prepended_(prepended) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& token = tokens[i];
      for (size_t at = 0; at < token.size();) {
        if (token.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepended_)) out += ' ';
          at += replacement_.size();
        } else {
          out += token[at++];
        }
      }
      tokens[i] = std::move(out);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool prepended_;
};

char32_t single_char(const JsonField& field) {
  const std::string& text = field.string();
  size_t at = 0;
  const char32_t c = text.empty() ? 0 : next_code_point(text, at);
  if (text.empty() || at != text.size()) field.fail("expected one character, got " + json_excerpt(field.json()));
  return c;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JsonField& field) {
  if (field.json().is_null()) return nullptr;
  const std::string& type = field["type"].string();
  if (type == "Sequence") {
    const JsonField list = field["decoders"];
    list.array();
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_decoder(list[i])) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(make_pattern(field["pattern"]), field["content"].string());
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const int64_t start = field["start"].integer(), stop = field["stop"].integer();
    if (start < 0 || stop < 0) field.fail("start and stop cannot be negative");
    return std::make_unique<StripDecoder>(single_char(field["content"]), static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Metaspace") {
    bool prepended = true;
    if (field.has("prepend_scheme")) {
      prepended = field["prepend_scheme"].string() != "never";
    } else if (field.has("add_prefix_space")) {
      prepended = field["add_prefix_space"].boolean();
    }
    return std::make_unique<MetaspaceDecoder>(field["replacement"].string(), prepended);
  }
  field["type"].fail("decoder type \"" + type +
                     "\" is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, "
                     "Sequence)");
}

}  // namespace zerotrain::text
