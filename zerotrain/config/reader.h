// The visitor that reads a JSON object into a config block: types, ranges, aliases,
// deprecated and removed keys, "auto", unknown keys with "did you mean", and the source of
// every value. It records problems in Diagnostics and carries on, so one run reports every
// problem in the file, not just the first.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/config/diagnostics.h"
#include "zerotrain/config/field.h"

namespace zerotrain::config {

struct ReadContext {
  Diagnostics& diags;
  SourceMap& sources;
  bool unknown_keys_are_errors = true;
  // Every key path of the schema, for "did you mean zero_optimization.offload_param?" when a
  // key sits at the wrong level.
  const std::vector<std::string>* schema_paths = nullptr;
};

class Reader {
 public:
  static constexpr bool kReading = true;

  // `object` may be null: the block is absent and every field takes its default.
  Reader(const Json* object, std::string path, ReadContext& ctx);

  template <class T>
  void field(std::string_view key, T& member, const FieldOpts& opts = {});

  // An old key that still works: `apply` receives its value and sets the new fields; a
  // warning names `use_instead`, whose path (relative to this block) is then marked
  // Source::kDerived unless `apply_sets_replacement` is false. Giving both the old and the
  // new key is an error.
  void deprecated(std::string_view key, std::string_view use_instead,
                  const std::function<void(const Json&)>& apply, bool apply_sets_replacement = true);
  // A key DeepSpeed dropped: an error explaining the migration. With `only_if_true`, the
  // value `false` is accepted (it asks for nothing).
  void removed(std::string_view key, std::string_view hint, bool only_if_true = false);
  // A block for a feature zerotrain does not implement (compression, sparse attention ...):
  // kept verbatim and accepted while it asks for nothing, else "not supported yet".
  void feature_block(std::string_view key, Json& member, std::string_view feature);

  // A key whose value is not checked (the params of an optimizer type already reported).
  void ignore(std::string_view key) {
    known_.emplace_back(key);
    if (find(key) != nullptr) consumed_.emplace(key);
  }

  // Reports keys that no field, alias or deprecated key claimed. Call once, after visit().
  void finish();

  const Json* find(std::string_view key) const;
  std::string path_of(std::string_view key) const;
  ReadContext& context() { return ctx_; }
  void set_source(std::string_view key, Source source) { ctx_.sources[path_of(key)] = source; }

 private:
  // The JSON value for a field, looking at its alias and deprecated alias too.
  // `message_path` gets the path as the file spells it (an alias, say), for messages.
  const Json* lookup(std::string_view key, const FieldOpts& opts, std::string& message_path);
  bool check_auto(const std::string& path, bool allowed);
  void check_range(const std::string& path, std::optional<double> value, const FieldOpts& opts);
  void type_error(const std::string& path, const std::string& expected, const Json& got);
  void note_unsupported(const std::string& path, std::string_view feature, const Json& value);

  template <class B>
  void read_block(const Json* value, const std::string& path, B& block) {
    if (value != nullptr && !value->is_object()) {
      type_error(path, "an object", *value);
      value = nullptr;
    }
    Reader child(value, path, ctx_);
    block.visit(child);
    child.finish();
  }

  const Json* object_;
  std::string path_;
  ReadContext& ctx_;
  std::vector<std::string> known_;    // names fields claimed, for "did you mean"
  std::set<std::string, std::less<>> consumed_;
};

template <class T>
void Reader::field(std::string_view key, T& member, const FieldOpts& opts) {
  std::string mpath;   // the path as spelled in the file, for messages
  const Json* value = lookup(key, opts, mpath);
  const std::string path = path_of(key);   // canonical, for sources
  if constexpr (Block<T>) {
    read_block(value, path, member);
  } else if constexpr (OptionalBlock<T>) {
    if (value == nullptr || value->is_null()) {
      member.reset();
      ctx_.sources[path] = Source::kDefault;
      return;
    }
    member.emplace();
    read_block(value, path, *member);
  } else {
    if (value == nullptr) {
      if (opts.required) ctx_.diags.error(mpath, "required key is missing");
      if (!ctx_.sources.contains(path)) ctx_.sources[path] = Source::kDefault;
      return;
    }
    if (value->is_string() && value->get<std::string>() == "auto") {
      if (check_auto(mpath, AutoValue<T>)) {
        if constexpr (AutoValue<T>) member.is_auto = true;
        ctx_.sources[path] = Source::kAutoPending;
      }
      return;
    }
    T parsed = member;
    std::string expected;
    if (!ValueTraits<T>::read(*value, parsed, expected)) {
      type_error(mpath, expected, *value);
      return;
    }
    check_range(mpath, numeric_value(parsed), opts);
    if (!opts.unsupported.empty() && !(parsed == member)) {
      note_unsupported(mpath, opts.unsupported, *value);
    }
    member = std::move(parsed);
    ctx_.sources[path] = Source::kFile;
  }
}

}  // namespace zerotrain::config
