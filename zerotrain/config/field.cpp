#include "zerotrain/config/field.h"

#include <cctype>
#include <cmath>

namespace zerotrain::config {

std::string enum_expected(const char* const* names, size_t count) {
  std::string out = "one of ";
  for (size_t i = 0; i < count; ++i) {
    out += (i == 0 ? "\"" : ", \"");
    out += names[i];
    out += "\"";
  }
  return out;
}

int enum_index(std::string_view text, const char* const* names, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    std::string_view name = names[i];
    if (name.size() != text.size()) continue;
    bool same = true;
    for (size_t c = 0; c < name.size() && same; ++c) {
      same = std::tolower(static_cast<unsigned char>(name[c])) ==
             std::tolower(static_cast<unsigned char>(text[c]));
    }
    if (same) return static_cast<int>(i);
  }
  return -1;
}

std::string describe_json(const Json& j) {
  // dump() writes NaN and infinity as null, which would read "got null (a number)".
  std::string text = j.is_number_float() && !std::isfinite(j.get<double>()) ? std::to_string(j.get<double>()) : j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  const char* kind = j.is_string() ? "a string"
                     : j.is_boolean() ? "a boolean"
                     : j.is_number_integer() ? "an integer"
                     : j.is_number() ? "a number"
                     : j.is_array() ? "a list"
                     : j.is_object() ? "an object"
                                     : "null";
  return text + " (" + kind + ")";
}

}  // namespace zerotrain::config
