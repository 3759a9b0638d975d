// tokenizer.json's "normalizer": what is done to the text before it is split into words.
// Supported: Sequence, Prepend, Replace, NFC, NFKC, NFD, NFKD, Lowercase, Strip; null is none.
#pragma once

#include "zerotrain/text/json_field.h"

#include <memory>
#include <string>

namespace zerotrain::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a null normalizer; a ConfigError naming the field for a type not supported.
std::unique_ptr<Normalizer> make_normalizer(const JsonField& field);

// A Replace's pattern: {"String": "..."} or {"Regex": "..."}, compiled to one regex.
class Regex;
std::unique_ptr<Regex> make_pattern(const JsonField& pattern);
// `text` with every match of `pattern` replaced by `content`.
std::string replace_all(const Regex& pattern, const std::string& text, const std::string& content);

}  // namespace zerotrain::text
