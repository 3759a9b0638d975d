#include "zerotrain/config/reader.h"

#include <fmt/format.h>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::config {
namespace {

// The keys HF's Trainer fills when their value is "auto" (transformers' HfTrainerDeepSpeedConfig).
constexpr const char* kAutoKeysHint =
    "\"auto\" is filled by the Trainer only for the batch sizes, gradient_clipping, "
    "optimizer.params.{lr,betas,eps,weight_decay}, scheduler.params.{warmup_min_lr,"
    "warmup_max_lr,warmup_num_steps,total_num_steps}, fp16.enabled, bf16.enabled and "
    "zero_optimization.{reduce_bucket_size,stage3_prefetch_bucket_size,"
    "stage3_param_persistence_threshold}; give a value here";

// Whether a block of an unimplemented feature asks for anything: it does when it enables
// something ("enabled": true anywhere inside), or when it is a non-empty block that has no
// "enabled" switch at all (its mere presence is the request, as for sparse_attention).
bool has_enabled_key(const Json& j, bool want_true) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "enabled" && (!want_true || (v.is_boolean() && v.get<bool>()))) return true;
      if (has_enabled_key(v, want_true)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (has_enabled_key(v, want_true)) return true;
    }
  }
  return false;
}

bool asks_for_something(const Json& j) {
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_object() && j.empty()) return false;
  if (has_enabled_key(j, /*want_true=*/true)) return true;
  return !has_enabled_key(j, /*want_true=*/false);
}

std::string last_component(const std::string& path) {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

}  // namespace

Reader::Reader(const Json* object, std::string path, ReadContext& ctx)
    : object_(object), path_(std::move(path)), ctx_(ctx) {}

const Json* Reader::find(std::string_view key) const {
  if (object_ == nullptr) return nullptr;
  auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

std::string Reader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const Json* Reader::lookup(std::string_view key, const FieldOpts& opts, std::string& message_path) {
  const Json* found = nullptr;
  message_path = path_of(key);
  std::vector<std::string> given;
  for (std::string_view name : {key, opts.alias, opts.deprecated_alias}) {
    if (name.empty()) continue;
    known_.emplace_back(name);
    if (const Json* v = find(name)) {
      consumed_.emplace(name);
      given.emplace_back(name);
      if (found == nullptr) {
        found = v;
        message_path = path_of(name);
      }
      if (name == opts.deprecated_alias) {
        ctx_.diags.warning(path_of(name), "deprecated key", detail::str("use \"", key, "\" instead"));
      }
    }
  }
  if (given.size() > 1) {
    ctx_.diags.error(path_of(key), detail::str("given twice, as ", strings::join_words(given, " and ")),
                     "keep one of them");
  }
  return found;
}

bool Reader::check_auto(const std::string& path, bool allowed) {
  if (!allowed) ctx_.diags.error(path, "\"auto\" is not accepted for this key", kAutoKeysHint);
  return allowed;
}

void Reader::check_range(const std::string& path, std::optional<double> value, const FieldOpts& opts) {
  if (!value) return;
  if ((opts.min && *value < *opts.min) || (opts.max && *value > *opts.max)) {
    // Exact numbers: a bound of 1073741824 printed as 1.07374e+09 could not be copied back.
    auto text = [](double x) { return fmt::format("{}", x); };
    std::string range = opts.min && opts.max ? detail::str("between ", text(*opts.min), " and ", text(*opts.max))
                        : opts.min           ? detail::str("at least ", text(*opts.min))
                                             : detail::str("at most ", text(*opts.max));
    ctx_.diags.error(path, detail::str("must be ", range, ", got ", text(*value)));
  }
}

void Reader::type_error(const std::string& path, const std::string& expected, const Json& got) {
  ctx_.diags.error(path, "expected " + expected + ", got " + describe_json(got));
}

void Reader::note_unsupported(const std::string& path, std::string_view feature, const Json& value) {
  ctx_.diags.not_supported(path, detail::str(feature, " (", last_component(path), "=", value.dump(), ")"),
                           "remove the key or set it to DeepSpeed's default");
}

void Reader::deprecated(std::string_view key, std::string_view use_instead,
                        const std::function<void(const Json&)>& apply, bool apply_sets_replacement) {
  known_.emplace_back(key);
  const Json* value = find(key);
  if (value == nullptr) return;
  consumed_.emplace(key);
  std::string replacement_key = last_component(std::string(use_instead));
  if (replacement_key != key && find(replacement_key) != nullptr) {
    ctx_.diags.error(path_of(key), detail::str("deprecated, and its replacement \"", use_instead,
                                               "\" is given too"),
                     "remove the deprecated key");
    return;
  }
  ctx_.diags.warning(path_of(key), "deprecated key", detail::str("use \"", use_instead, "\" instead"));
  apply(*value);
  if (apply_sets_replacement) ctx_.sources[path_of(use_instead)] = Source::kDerived;
}

void Reader::removed(std::string_view key, std::string_view hint, bool only_if_true) {
  known_.emplace_back(key);
  const Json* value = find(key);
  if (value == nullptr) return;
  consumed_.emplace(key);
  if (only_if_true && value->is_boolean() && !value->get<bool>()) {
    ctx_.diags.warning(path_of(key), "obsolete key (its value false changes nothing)", "remove it");
    return;
  }
  ctx_.diags.error(path_of(key), "no longer supported by DeepSpeed", std::string(hint));
}

void Reader::feature_block(std::string_view key, Json& member, std::string_view feature) {
  known_.emplace_back(key);
  const Json* value = find(key);
  std::string path = path_of(key);
  if (value == nullptr) {
    member = nullptr;
    return;
  }
  consumed_.emplace(key);
  member = *value;
  ctx_.sources[path] = Source::kFile;
  if (asks_for_something(*value)) {
    ctx_.diags.not_supported(path, detail::str(feature, " is not implemented by zerotrain"),
                             has_enabled_key(*value, /*want_true=*/false)
                                 ? "remove the block or set its \"enabled\" flags to false"
                                 : "remove the block");
  }
}

void Reader::finish() {
  if (object_ == nullptr) return;
  for (const auto& [key, value] : object_->items()) {
    if (consumed_.contains(key)) continue;
    // A key that exists verbatim at another level most likely belongs there; otherwise
    // look for a typo of a key of this block.
    std::string hint;
    std::vector<std::string> elsewhere;
    if (ctx_.schema_paths != nullptr) {
      const std::string here = path_of(key);
      for (const auto& p : *ctx_.schema_paths) {
        if (last_component(p) == key && p != here) elsewhere.push_back(p);
      }
    }
    if (!elsewhere.empty()) {
      hint = "did you mean " + strings::join_words(elsewhere) + "? (it belongs there)";
    } else if (auto near = strings::closest_match(key, known_)) {
      hint = "did you mean " + *near + "?";
    }
    if (hint.empty()) hint = "remove it (DeepSpeed would reject or ignore it); see docs/config.md";
    if (ctx_.unknown_keys_are_errors) {
      ctx_.diags.error(path_of(key), "unknown key", hint);
    } else {
      ctx_.diags.warning(path_of(key), "unknown key, ignored", hint);
    }
  }
}

}  // namespace zerotrain::config
