#include "zerotrain/config/spelled_auto.h"

#include <array>
#include <string>
#include <string_view>

#include "zerotrain/config/schema_optim_impl.h"

namespace zerotrain::config {
namespace {

// Walks the schema to one canonical path and keeps the spellings its field accepts.
class SpellingFinder {
 public:
  static constexpr bool kReading = false;

  SpellingFinder(std::string_view target, std::string prefix) : target_(target), prefix_(std::move(prefix)) {}

  template <class T>
  void field(std::string_view key, T& member, const FieldOpts& opts = {}) {
    const std::string path = prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
    if (path == target_) {
      alias_ = opts.alias;
      deprecated_alias_ = opts.deprecated_alias;
      return;
    }
    if (target_.substr(0, path.size() + 1) != path + ".") return;   // not on the way to the target
    if constexpr (Block<T>) {
      descend(member, path);
    } else if constexpr (OptionalBlock<T>) {
      typename T::value_type defaults;
      descend(defaults, path);
    }
  }
  void deprecated(std::string_view, std::string_view, const std::function<void(const Json&)>&, bool = true) {}
  void removed(std::string_view, std::string_view, bool = false) {}
  void ignore(std::string_view) {}
  void feature_block(std::string_view, Json&, std::string_view) {}

  std::array<std::string_view, 2> aliases() const { return {alias_, deprecated_alias_}; }

 private:
  template <class B>
  void descend(B& block, const std::string& path) {
    SpellingFinder child(target_, path);
    block.visit(child);
    if (!child.alias_.empty()) alias_ = child.alias_;
    if (!child.deprecated_alias_.empty()) deprecated_alias_ = child.deprecated_alias_;
  }

  std::string_view target_;
  std::string prefix_;
  std::string_view alias_;
  std::string_view deprecated_alias_;
};

const Json& at_path(const Json& root, std::string_view path) {
  const Json* node = &root;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('.', begin), path.size());
    node = &node->at(std::string(path.substr(begin, end - begin)));
    begin = end + 1;
  }
  return *node;
}

// The key under which `node` holds the field at canonical `path` (whose last part is
// `key`): the canonical name, or an alias of the schema's that the file used.
std::string spelled_key(const Json& node, const std::string& path, const std::string& key, Config& schema) {
  if (node.contains(key)) return key;
  SpellingFinder finder(path, "");
  schema.visit(finder);
  for (std::string_view alias : finder.aliases()) {
    if (!alias.empty() && node.contains(std::string(alias))) return std::string(alias);
  }
  return key;
}

}  // namespace

Json with_filled_auto(const Config& resolved, Json raw) {
  if (!raw.is_object()) raw = Json::object();
  const Json effective = resolved.to_json();
  Config schema;   // the visit needs a mutable config; only the fields' options are read
  for (const auto& [path, source] : resolved.sources) {
    if (source != Source::kAuto) continue;
    Json* node = &raw;
    size_t begin = 0;
    for (;;) {
      const size_t dot = path.find('.', begin);
      const std::string key = spelled_key(*node, path.substr(0, dot), path.substr(begin, dot - begin), schema);
      if (dot == std::string::npos) {
        (*node)[key] = at_path(effective, path);
        break;
      }
      if (!node->contains(key) || !(*node)[key].is_object()) (*node)[key] = Json::object();
      node = &(*node)[key];
      begin = dot + 1;
    }
  }
  return raw;
}

}  // namespace zerotrain::config
