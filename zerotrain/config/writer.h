// The visitor that writes a config block back out as JSON: the effective config, with every
// default filled in. With `expand_absent_blocks` it also writes optional blocks that are
// absent (with their defaults), which gives the whole schema.
#pragma once

#include <functional>
#include <string_view>

#include "zerotrain/config/field.h"

namespace zerotrain::config {

class Writer {
 public:
  static constexpr bool kReading = false;

  explicit Writer(bool expand_absent_blocks = false) : expand_(expand_absent_blocks) {}

  template <class T>
  void field(std::string_view key, T& member, const FieldOpts& = {}) {
    if constexpr (Block<T>) {
      out_[std::string(key)] = write_block(member);
    } else if constexpr (OptionalBlock<T>) {
      if (member) {
        out_[std::string(key)] = write_block(*member);
      } else if (expand_) {
        typename T::value_type defaults;
        out_[std::string(key)] = write_block(defaults);
      } else {
        out_[std::string(key)] = nullptr;
      }
    } else {
      out_[std::string(key)] = ValueTraits<T>::write(member);
    }
  }
  void deprecated(std::string_view, std::string_view, const std::function<void(const Json&)>&, bool = true) {}
  void removed(std::string_view, std::string_view, bool = false) {}
  void ignore(std::string_view) {}
  void feature_block(std::string_view key, Json& member, std::string_view) {
    if (!member.is_null()) out_[std::string(key)] = member;
  }

  Json take() { return std::move(out_); }

 private:
  template <class B>
  Json write_block(B& block) {
    Writer child(expand_);
    block.visit(child);
    return child.take();
  }

  bool expand_;
  Json out_ = Json::object();
};

}  // namespace zerotrain::config
