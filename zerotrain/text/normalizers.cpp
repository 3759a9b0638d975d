#include "zerotrain/text/normalizers.h"

#include "zerotrain/text/regex.h"
#include "zerotrain/text/utf8.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/ustring.h>

#include <stdexcept>
#include <vector>

namespace zerotrain::text {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Llama 2's "▁" before the text; nothing before an empty text.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = replace_all(*pattern_, text, content_); }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Unicode normalization forms, by ICU.
class IcuNormalizer final : public Normalizer {
 public:
  explicit IcuNormalizer(const icu::Normalizer2* form) : form_(form) {}
  void normalize(std::string& text) const override {
    UErrorCode status = U_ZERO_ERROR;
    if (form_->isNormalizedUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), status) &&
        U_SUCCESS(status)) {
      return;
    }
    status = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    form_->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
    if (U_FAILURE(status)) {
      throw std::runtime_error(std::string("Unicode normalization failed: ") + u_errorName(status));
    }
    text = std::move(out);
  }

 private:
  const icu::Normalizer2* form_;
};

// Strip: whitespace (Unicode's White_Space, Rust's char::is_whitespace) off either end.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t at = begin;
        if (!is_unicode_whitespace(next_code_point(text, at))) break;
        begin = at;
      }
    }
    if (right_) {
      size_t at = begin;
      size_t last_non_space_end = begin;
      while (at < end) {
        if (!is_unicode_whitespace(next_code_point(text, at))) last_non_space_end = at;
      }
      end = last_non_space_end;
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Lowercase: each character's full lowercase mapping on its own, as Rust's char::to_lowercase
// (so "İ" becomes "i̇", and a final "Σ" is "σ" like any other: no context).
class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
      const char32_t c = next_code_point(text, at);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
        continue;
      }
      UChar source[2];
      int32_t source_length = 0;
      U16_APPEND_UNSAFE(source, source_length, static_cast<UChar32>(c));
      UChar lower[8];
      UErrorCode status = U_ZERO_ERROR;
      const int32_t lower_length = u_strToLower(lower, 8, source, source_length, "", &status);
      if (U_FAILURE(status)) {
        append_utf8(out, c);
        continue;
      }
      for (int32_t i = 0; i < lower_length;) {
        UChar32 mapped;
        U16_NEXT_UNSAFE(lower, i, mapped);
        append_utf8(out, static_cast<char32_t>(mapped));
      }
    }
    text = std::move(out);
  }
};

const icu::Normalizer2* icu_form(const JsonField& field, const std::string& type) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                 : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                 : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                                  : icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status)) field.fail(std::string("ICU has no ") + type + " data: " + u_errorName(status));
  return form;
}

}  // namespace

std::unique_ptr<Regex> make_pattern(const JsonField& pattern) {
  try {
    if (pattern.has("String")) return std::make_unique<Regex>(regex_quote(pattern["String"].string()));
    if (pattern.has("Regex")) return std::make_unique<Regex>(pattern["Regex"].string());
  } catch (const std::invalid_argument& e) {
    pattern.fail(std::string("the regex does not compile: ") + e.what());
  }
  pattern.fail("expected {\"String\": ...} or {\"Regex\": ...}, got " + json_excerpt(pattern.json()));
}

std::string replace_all(const Regex& pattern, const std::string& text, const std::string& content) {
  std::vector<RegexMatch> matches;
  pattern.find_all(text, matches);
  if (matches.empty()) return text;
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  size_t from = 0;
  for (const RegexMatch& m : matches) {
    out.append(text, from, m.begin - from);
    out.append(content);
    from = m.end;
  }
  out.append(text, from, std::string::npos);
  return out;
}

std::unique_ptr<Normalizer> make_normalizer(const JsonField& field) {
  if (field.json().is_null()) return nullptr;
  const std::string& type = field["type"].string();
  if (type == "Sequence") {
    const JsonField list = field["normalizers"];
    list.array();
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_normalizer(list[i])) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(field["prepend"].string());
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(make_pattern(field["pattern"]), field["content"].string());
  }
  if (type == "NFC" || type == "NFKC" || type == "NFD" || type == "NFKD") {
    return std::make_unique<IcuNormalizer>(icu_form(field, type));
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(field["strip_left"].boolean(), field["strip_right"].boolean());
  }
  field["type"].fail("normalizer type \"" + type +
                     "\" is not supported (supported: Sequence, Prepend, Replace, NFC, NFKC, NFD, NFKD, Lowercase, "
                     "Strip); "
                     "use the tokenizer with the Python tokenizers package instead");
}

}  // namespace zerotrain::text
