#include "zerotrain/text/json_field.h"

#include "zerotrain/core/error.h"

namespace zerotrain::text {

std::string json_excerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void JsonField::fail(std::string_view what) const {
  throw ConfigError(detail::str(*origin_, ": ", path_.empty() ? "(top level)" : path_, ": ", what));
}

JsonField JsonField::operator[](std::string_view key) const {
  const std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (!value_->is_object()) fail("expected an object with \"" + std::string(key) + "\", got " + json_excerpt(*value_));
  const auto it = value_->find(key);
  if (it == value_->end()) {
    JsonField(*value_, child, *origin_).fail("missing; tokenizer.json as the tokenizers package saves it has it");
  }
  return JsonField(*it, child, *origin_);
}

JsonField JsonField::operator[](size_t index) const {
  return JsonField(value_->at(index), path_ + "[" + std::to_string(index) + "]", *origin_);
}

bool JsonField::has(std::string_view key) const {
  if (!value_->is_object()) return false;
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

const std::string& JsonField::string() const {
  if (!value_->is_string()) fail("expected a string, got " + json_excerpt(*value_));
  return value_->get_ref<const std::string&>();
}

bool JsonField::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false, got " + json_excerpt(*value_));
  return value_->get<bool>();
}

int64_t JsonField::integer() const {
  if (!value_->is_number_integer()) fail("expected an integer, got " + json_excerpt(*value_));
  return value_->get<int64_t>();
}

const Json::object_t& JsonField::object() const {
  if (!value_->is_object()) fail("expected an object, got " + json_excerpt(*value_));
  return value_->get_ref<const Json::object_t&>();
}

const Json::array_t& JsonField::array() const {
  if (!value_->is_array()) fail("expected a list, got " + json_excerpt(*value_));
  return value_->get_ref<const Json::array_t&>();
}

}  // namespace zerotrain::text
