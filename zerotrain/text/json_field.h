// A value of tokenizer.json together with its path ("model.merges[3]"), so that every
// ConfigError names the file and the field it is about.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace zerotrain::text {

using Json = nlohmann::json;

class JsonField {
 public:
  JsonField(const Json& value, std::string path, const std::string& origin)
      : value_(&value), path_(std::move(path)), origin_(&origin) {}

  const Json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }

  // The member `key` of this object; a ConfigError when this is not an object or has none.
  JsonField operator[](std::string_view key) const;
  JsonField operator[](size_t index) const;
  // Present and not null.
  bool has(std::string_view key) const;
  size_t size() const { return value_->size(); }

  const std::string& string() const;
  bool boolean() const;
  int64_t integer() const;
  // Each requires that kind of value; a ConfigError naming the field otherwise.
  const Json::object_t& object() const;
  const Json::array_t& array() const;

  // A ConfigError "ORIGIN: PATH: WHAT".
  [[noreturn]] void fail(std::string_view what) const;

 private:
  const Json* value_;
  std::string path_;
  const std::string* origin_;
};

// How a JSON value reads in a message: its text, shortened.
std::string json_excerpt(const Json& value);

}  // namespace zerotrain::text
