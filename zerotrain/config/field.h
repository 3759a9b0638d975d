// The vocabulary the config schema is written in: value types ("auto"-able values, enums),
// per-field options, and how each type is read from and written to JSON.
//
// Every config block is a struct whose members carry DeepSpeed's defaults as initializers and
// whose `visit(v)` names each field once; the same visit drives reading (config/reader.h),
// writing the effective config (config/writer.h) and listing the schema. See
// docs/notes/config-schema.md.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "zerotrain/config/json_text.h"

namespace zerotrain::config {

// A value that HF's Trainer may fill: the file says "auto" and resolve_auto() sets it from
// the Trainer arguments (see config/resolve.h).
template <class T>
struct Auto {
  T value{};
  bool is_auto = false;

  Auto() = default;
  Auto(T v) : value(std::move(v)) {}   // NOLINT: lets defaults read `Auto<double> lr = 1e-3;`
  bool operator==(const Auto&) const = default;
};

// A struct with `static constexpr bool kIsBlock = true;` and `template <class V> void visit(V&)`.
template <class T>
concept Block = requires { requires T::kIsBlock; };

template <class T> struct IsOptionalBlockT : std::false_type {};
template <Block T> struct IsOptionalBlockT<std::optional<T>> : std::true_type {};
template <class T>
concept OptionalBlock = IsOptionalBlockT<T>::value;

template <class T> struct IsAutoT : std::false_type {};
template <class T> struct IsAutoT<Auto<T>> : std::true_type {};
template <class T>
concept AutoValue = IsAutoT<T>::value;

// Enumerations are written as strings; specialize EnumNames<E> with the accepted spellings,
// in the enum's order: `static constexpr std::array<const char*, N> names{...}`.
template <class E> struct EnumNames;
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires { EnumNames<E>::names; };

template <NamedEnum E>
const char* enum_name(E e) {
  return EnumNames<E>::names[static_cast<size_t>(e)];
}

struct FieldOpts {
  std::string_view alias;             // a second accepted spelling (DeepSpeed's stage3_* names)
  std::string_view deprecated_alias;  // an old spelling, accepted with a warning
  bool required = false;              // absent is an error (DeepSpeed raises too)
  std::optional<double> min;          // inclusive bounds for numbers
  std::optional<double> max;
  std::string_view unsupported;       // feature zerotrain lacks: a non-default value is an error
};

// ---------------------------------------------------------------------------------------
// Reading and writing single values. read() returns false and fills `expected` on a type
// mismatch; it never throws.
template <class T, class = void> struct ValueTraits;

template <> struct ValueTraits<bool> {
  static bool read(const Json& j, bool& out, std::string& expected) {
    expected = "true or false";
    if (!j.is_boolean()) return false;
    out = j.get<bool>();
    return true;
  }
  static Json write(bool v) { return v; }
};

template <> struct ValueTraits<int64_t> {
  // DeepSpeed (pydantic, lax mode) takes integral floats such as 5e8 for integer fields.
  static bool read(const Json& j, int64_t& out, std::string& expected) {
    expected = "an integer";
    // An unsigned JSON integer above 2^63-1 would wrap to a negative value.
    if (j.is_number_unsigned()) {
      if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        expected = "an integer up to 2^63-1";
        return false;
      }
      out = static_cast<int64_t>(j.get<uint64_t>());
      return true;
    }
    if (j.is_number_integer()) {
      out = j.get<int64_t>();
      return true;
    }
    if (j.is_number_float()) {
      double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        out = static_cast<int64_t>(d);
        return true;
      }
    }
    return false;
  }
  static Json write(int64_t v) { return v; }
};

template <> struct ValueTraits<double> {
  static bool read(const Json& j, double& out, std::string& expected) {
    // JSON text has no NaN or infinity, but a Json built in C++ (the API, the values the
    // command line fills) can; a range check would let NaN through (every comparison is false).
    expected = "a finite number";
    if (!j.is_number() || !std::isfinite(j.get<double>())) return false;
    out = j.get<double>();
    return true;
  }
  static Json write(double v) { return v; }
};

template <> struct ValueTraits<std::string> {
  static bool read(const Json& j, std::string& out, std::string& expected) {
    expected = "a string";
    if (!j.is_string()) return false;
    out = j.get<std::string>();
    return true;
  }
  static Json write(const std::string& v) { return v; }
};

template <> struct ValueTraits<std::array<double, 2>> {
  static bool read(const Json& j, std::array<double, 2>& out, std::string& expected) {
    expected = "a list of two finite numbers";
    if (!j.is_array() || j.size() != 2 || !j[0].is_number() || !j[1].is_number()) return false;
    if (!std::isfinite(j[0].get<double>()) || !std::isfinite(j[1].get<double>())) return false;
    out = {j[0].get<double>(), j[1].get<double>()};
    return true;
  }
  static Json write(const std::array<double, 2>& v) { return Json::array({v[0], v[1]}); }
};

template <> struct ValueTraits<Json> {   // free-form: any JSON value
  static bool read(const Json& j, Json& out, std::string&) {
    out = j;
    return true;
  }
  static Json write(const Json& v) { return v; }
};

std::string enum_expected(const char* const* names, size_t count);
// Case-insensitive match of `text` against `names`; returns the index or -1.
int enum_index(std::string_view text, const char* const* names, size_t count);

template <NamedEnum E> struct ValueTraits<E> {
  static bool read(const Json& j, E& out, std::string& expected) {
    const auto& names = EnumNames<E>::names;
    expected = enum_expected(names.data(), names.size());
    if (!j.is_string()) return false;
    int index = enum_index(j.get<std::string>(), names.data(), names.size());
    if (index < 0) return false;
    out = static_cast<E>(index);
    return true;
  }
  static Json write(E v) { return enum_name(v); }
};

template <class T> struct ValueTraits<std::optional<T>> {
  static bool read(const Json& j, std::optional<T>& out, std::string& expected) {
    if (j.is_null()) {
      out.reset();
      return true;
    }
    T value{};
    if (!ValueTraits<T>::read(j, value, expected)) {
      expected += " or null";
      return false;
    }
    out = std::move(value);
    return true;
  }
  static Json write(const std::optional<T>& v) { return v ? ValueTraits<T>::write(*v) : Json(nullptr); }
};

template <class T> struct ValueTraits<Auto<T>> {
  static bool read(const Json& j, Auto<T>& out, std::string& expected) {
    out.is_auto = false;
    bool ok = ValueTraits<T>::read(j, out.value, expected);
    if (!ok) expected += " or \"auto\"";
    return ok;
  }
  static Json write(const Auto<T>& v) { return v.is_auto ? Json("auto") : ValueTraits<T>::write(v.value); }
};

// The number inside a value, for range checks; nullopt for non-numbers and absent optionals.
template <class T>
std::optional<double> numeric_value(const T& v) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
    return static_cast<double>(v);
  } else if constexpr (AutoValue<T>) {
    return numeric_value(v.value);
  } else if constexpr (requires { v.has_value(); *v; }) {
    return v ? numeric_value(*v) : std::nullopt;
  } else {
    return std::nullopt;
  }
}

// A short description of a JSON value for "got ..." in messages: `"two" (a string)`.
std::string describe_json(const Json& j);

}  // namespace zerotrain::config
