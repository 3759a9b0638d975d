#include "zerotrain/config/resolve.h"

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/config/batch.h"
#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

using detail::str;

// Which Trainer argument fills each "auto" key, for messages.
const std::map<std::string, std::string>& auto_sources() {
  static const std::map<std::string, std::string> m = {
      {"train_batch_size", "world_size * per_device_train_batch_size * gradient_accumulation_steps"},
      {"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"},
      {"gradient_accumulation_steps", "--gradient_accumulation_steps"},
      {"gradient_clipping", "--max_grad_norm"},
      {"optimizer.params.lr", "--learning_rate"},
      {"optimizer.params.betas", "--adam_beta1 and --adam_beta2"},
      {"optimizer.params.eps", "--adam_epsilon"},
      {"optimizer.params.weight_decay", "--weight_decay"},
      {"scheduler.params.warmup_min_lr", "0"},
      {"scheduler.params.warmup_max_lr", "--learning_rate"},
      {"scheduler.params.warmup_num_steps", "--warmup_steps or --warmup_ratio"},
      {"scheduler.params.total_num_steps", "the number of training steps"},
      {"fp16.enabled", "--fp16"},
      {"bf16.enabled", "--bf16"},
      {"zero_optimization.reduce_bucket_size", "the model's hidden size (hidden_size^2)"},
      {"zero_optimization.prefetch_bucket_size", "the model's hidden size (0.9 * hidden_size^2)"},
      {"zero_optimization.param_persistence_threshold", "the model's hidden size (10 * hidden_size)"},
  };
  return m;
}

template <class T>
std::string show(const T& v) {
  std::ostringstream out;
  if constexpr (requires { v.has_value(); }) {
    if (!v) return "null";
    out << *v;
  } else if constexpr (requires { v[0]; v.size(); }) {
    out << "[" << v[0] << ", " << v[1] << "]";
  } else {
    out << std::boolalpha << v;
  }
  return out.str();
}

// One "fill_match": an "auto" value takes `hf`; a value from the file must equal it.
class Filler {
 public:
  Filler(Config& config) : config_(config) {}

  template <class T, class H>
  void match(const std::string& path, Auto<T>& field, const H& hf, const std::string& hf_name) {
    if (field.is_auto) {
      field.value = T(hf);
      field.is_auto = false;
      config_.sources[path] = Source::kAuto;
    } else if (config_.source_of(path) == Source::kFile && !(field.value == T(hf))) {
      mismatches_.push_back(str("- ds ", path, "=", show(field.value), " vs hf ", hf_name, "=", show(T(hf))));
    }
  }
  // A Trainer flag that asks for a mode the config does not mention. HF then drops the flag
  // (DeepSpeed trains in fp32 although --bf16 was given); here the flag turns the mode on.
  void enable_if_absent(const std::string& path, Auto<bool>& field, bool flag) {
    if (!flag || config_.source_of(path) != Source::kDefault) return;
    field.value = true;
    config_.sources[path] = Source::kAuto;
  }
  template <class T, class H>
  void fill_only(const std::string& path, Auto<T>& field, const H& value) {
    if (!field.is_auto) return;
    field.value = T(value);
    field.is_auto = false;
    config_.sources[path] = Source::kAuto;
  }

  void mismatch(const std::string& path, const std::string& ds_value, const std::string& hf) {
    mismatches_.push_back(str("- ds ", path, " ", ds_value, " vs hf ", hf));
  }

  void throw_if_mismatched() const {
    if (mismatches_.empty()) return;
    std::string text = "config values mismatch the Trainer arguments:";
    for (const auto& m : mismatches_) text += "\n  " + m;
    text += "\n  set these keys to \"auto\" to take the Trainer's values, or pass matching arguments";
    throw ConfigError(text);
  }

 private:
  Config& config_;
  std::vector<std::string> mismatches_;
};

template <class Params>
void fill_optimizer_params(Filler& f, Params& p, const TrainerArgs& a) {
  f.match("optimizer.params.lr", p.lr, a.learning_rate, "learning_rate");
  if constexpr (requires { p.betas; }) {
    f.match("optimizer.params.betas", p.betas, std::array<double, 2>{a.adam_beta1, a.adam_beta2},
            "adam_beta1+adam_beta2");
  }
  if constexpr (requires { p.eps; }) f.match("optimizer.params.eps", p.eps, a.adam_epsilon, "adam_epsilon");
  f.match("optimizer.params.weight_decay", p.weight_decay, a.weight_decay, "weight_decay");
}

// HF's rule (warmup_steps wins when set), except that a negative count is passed on to be
// refused as warmup_num_steps would be, instead of falling back to warmup_ratio.
int64_t warmup_steps(const TrainerArgs& a, int64_t total) {
  if (a.warmup_steps != 0) return a.warmup_steps;
  // ceil(total * ratio) is at most total for a ratio in [0, 1] (checked before); in doubles a
  // total near 2^63 rounds up to 2^63, which no int64_t holds.
  const double steps = std::ceil(static_cast<double>(total) * a.warmup_ratio);
  return steps >= static_cast<double>(total) ? total : static_cast<int64_t>(steps);
}

// A product of Trainer arguments that fills a config key; one that does not fit in 64 bits
// is an error, not a wrapped (negative) batch size.
int64_t checked_product(std::initializer_list<int64_t> factors, const char* what) {
  int64_t product = 1;
  for (int64_t f : factors) {
    ZT_CHECK(!__builtin_mul_overflow(product, f, &product), ConfigError, what,
             " does not fit in a 64-bit integer; use smaller values");
  }
  return product;
}

void fill_auto(Config& c, const TrainerArgs& a) {
  Filler f(c);
  using OptI = std::optional<int64_t>;
  f.match("train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu,
          OptI(a.per_device_train_batch_size), "per_device_train_batch_size");
  f.match("gradient_accumulation_steps", c.gradient_accumulation_steps, OptI(a.gradient_accumulation_steps),
          "gradient_accumulation_steps");
  f.match("train_batch_size", c.train_batch_size,
          OptI(checked_product({a.world_size, a.per_device_train_batch_size, a.gradient_accumulation_steps},
                               "world_size * --per_device_train_batch_size * --gradient_accumulation_steps")),
          "train_batch_size (calculated)");
  f.match("gradient_clipping", c.gradient_clipping, a.max_grad_norm, "max_grad_norm");
  if (c.optimizer) {
    std::visit([&](auto& p) { fill_optimizer_params(f, p, a); }, c.optimizer->params);
  }
  f.match("fp16.enabled", c.fp16.enabled, a.fp16, "fp16");
  f.match("bf16.enabled", c.bf16.enabled, a.bf16, "bf16");
  // Unless the config already trains in the other half-precision dtype: then the flag and
  // the config disagree, and enabling both would only produce a "both enabled" error.
  if (!(c.bf16_enabled() && c.source_of("bf16.enabled") == Source::kFile)) {
    f.enable_if_absent("fp16.enabled", c.fp16.enabled, a.fp16);
  } else if (a.fp16 && c.source_of("fp16.enabled") == Source::kDefault) {
    f.mismatch("fp16.enabled", "absent, with bf16.enabled=true", "fp16=true");
  }
  if (!(c.fp16_enabled() && c.source_of("fp16.enabled") == Source::kFile)) {
    f.enable_if_absent("bf16.enabled", c.bf16.enabled, a.bf16);
  } else if (a.bf16 && c.source_of("bf16.enabled") == Source::kDefault) {
    f.mismatch("bf16.enabled", "absent, with fp16.enabled=true", "bf16=true");
  }

  if (c.scheduler) {
    std::visit(
        [&](auto& p) {
          if constexpr (requires { p.warmup_min_lr; }) {
            f.fill_only("scheduler.params.warmup_min_lr", p.warmup_min_lr, 0.0);
            f.match("scheduler.params.warmup_max_lr", p.warmup_max_lr, a.learning_rate, "learning_rate");
          }
          if constexpr (requires { p.total_num_steps; }) {
            if (a.num_training_steps) {
              f.match("scheduler.params.total_num_steps", p.total_num_steps, OptI(*a.num_training_steps),
                      "num_training_steps (calculated)");
              f.match("scheduler.params.warmup_num_steps", p.warmup_num_steps,
                      warmup_steps(a, *a.num_training_steps), "warmup_steps");
            }
          } else if constexpr (requires { p.warmup_num_steps; }) {
            if (a.num_training_steps) {
              f.match("scheduler.params.warmup_num_steps", p.warmup_num_steps,
                      warmup_steps(a, *a.num_training_steps), "warmup_steps");
            }
          }
        },
        c.scheduler->params);
  }

  // A flag that turns a mode on, as --bf16 does; a config that turns it off disagrees.
  if (a.save_async) {
    if (c.source_of("checkpoint.async_save") == Source::kFile && !c.checkpoint.async_save) {
      f.mismatch("checkpoint.async_save", "=false", "save_async=true");
    } else {
      c.checkpoint.async_save = true;
      if (c.source_of("checkpoint.async_save") == Source::kDefault) c.sources["checkpoint.async_save"] = Source::kAuto;
    }
  }

  auto& z = c.zero_optimization;
  if (a.hidden_size) {
    // Computed only for the keys that ask: a product that overflows for a key the config
    // sets itself is no error.
    const int64_t h = *a.hidden_size;
    if (z.reduce_bucket_size.is_auto) {
      f.fill_only("zero_optimization.reduce_bucket_size", z.reduce_bucket_size,
                  checked_product({h, h}, "the model's hidden_size^2 (for reduce_bucket_size)"));
    }
    if (z.shards_parameters() && z.prefetch_bucket_size.is_auto) {
      const int64_t h2 = checked_product({h, h}, "the model's hidden_size^2 (for stage3_prefetch_bucket_size)");
      f.fill_only("zero_optimization.prefetch_bucket_size", z.prefetch_bucket_size,
                  static_cast<int64_t>(0.9 * static_cast<double>(h2)));
    }
    if (z.shards_parameters() && z.param_persistence_threshold.is_auto) {
      f.fill_only("zero_optimization.param_persistence_threshold", z.param_persistence_threshold,
                  checked_product({10, h}, "10 * the model's hidden_size (for stage3_param_persistence_threshold)"));
    }
  }
  f.throw_if_mismatched();
}

// The file reader's checks, run again on the config as it now is: a value that the Trainer
// arguments filled, or that C++ code set, passes exactly the checks (types, ranges, finite
// numbers, the checks across blocks) that it would have passed in the file.
void check_as_read(const Config& c, const std::string& what) {
  const Config again = load_config(c.to_json());
  Diagnostics refused;
  for (const auto& d : again.diagnostics.items()) {
    if (d.severity == Severity::kWarning) continue;
    std::string message = d.message;
    if (c.source_of(d.path) == Source::kAuto) {
      if (auto it = auto_sources().find(d.path); it != auto_sources().end()) {
        message += " (filled from " + it->second + ")";
      }
    }
    if (d.severity == Severity::kError) refused.error(d.path, message, d.hint);
    if (d.severity == Severity::kNotSupported) refused.not_supported(d.path, message, d.hint);
  }
  refused.throw_if_errors(what);
}

// A config in which every key the Trainer fills is "auto": filling it from the arguments and
// reading it back checks each argument as the key it fills, whatever the user's config has.
const Json& every_auto_key() {
  static const Json j = Json::parse(R"({
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR",
                  "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
    "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"}})");
  return j;
}

}  // namespace

void check_trainer_args(const TrainerArgs& a) {
  // HF's own rules for what fills no config key (TrainingArguments.__post_init__, set_seed).
  ZT_CHECK(a.world_size >= 1, ConfigError, "the world size must be at least 1, got ", a.world_size);
  ZT_CHECK(a.warmup_ratio >= 0.0 && a.warmup_ratio <= 1.0, ConfigError,
           "--warmup_ratio must lie in range [0,1], got ", a.warmup_ratio);
  ZT_CHECK(a.seed >= 0 && a.seed <= 0xFFFFFFFFLL, ConfigError, "--seed must be between 0 and 2**32 - 1, got ",
           a.seed, " (HF's set_seed seeds numpy, which takes no other value)");
  ZT_CHECK(!a.num_training_steps || *a.num_training_steps >= 1, ConfigError,
           "the number of training steps must be at least 1, got ", *a.num_training_steps);
  // Everything else fills a config key and is checked as that key is.
  Config probe = load_config(every_auto_key());
  ZT_INTERNAL_ASSERT(!probe.diagnostics.has_errors(), "the all-\"auto\" config does not load");
  TrainerArgs filling = a;   // so that the warmup keys are filled, and checked, too
  if (!filling.num_training_steps) filling.num_training_steps = 1;
  // The model's hidden size is no Trainer argument: it fills the bucket sizes only where the
  // user's config asks ("auto"), and is checked there.
  filling.hidden_size.reset();
  fill_auto(probe, filling);
  check_as_read(probe, "the Trainer arguments");
}

void resolve_auto(Config& c, const TrainerArgs& a) {
  check_trainer_args(a);
  fill_auto(c, a);
}

void derive_batch(Config& c, int64_t world_size) {
  if (c.train_batch_size.is_auto || c.train_micro_batch_size_per_gpu.is_auto ||
      c.gradient_accumulation_steps.is_auto) {
    return;
  }
  auto sizes = derive_batch_sizes({c.train_batch_size.value, c.train_micro_batch_size_per_gpu.value,
                                   c.gradient_accumulation_steps.value},
                                  world_size, c.diagnostics);
  if (!sizes) return;
  auto set = [&](const char* path, Auto<std::optional<int64_t>>& field, int64_t value) {
    if (!field.value) c.sources[path] = Source::kDerived;
    field.value = value;
  };
  set("train_batch_size", c.train_batch_size, sizes->train_batch_size);
  set("train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu, sizes->micro_batch_per_gpu);
  set("gradient_accumulation_steps", c.gradient_accumulation_steps, sizes->gradient_accumulation_steps);
}

void finalize(Config& c, int64_t world_size) {
  auto& z = c.zero_optimization;
  // Outside stage 3 these are unused; DeepSpeed drops their "auto" and keeps the default.
  if (!z.shards_parameters()) {
    for (auto* field : {&z.prefetch_bucket_size, &z.param_persistence_threshold}) field->is_auto = false;
  }
  Diagnostics problems;
  for (const auto& path : c.unresolved_auto_keys()) {
    auto it = auto_sources().find(path);
    problems.error(path, "still \"auto\" when the engine starts",
                   it == auto_sources().end() ? "give a value"
                                              : "give a value, or let the Trainer fill it from " + it->second);
  }
  problems.throw_if_errors("");
  // Everything `config check` checks, again on the values "auto" resolved to and on what
  // C++ code set: what the engine refuses here, config check reports for concrete values.
  check_as_read(c, "the resolved config");
  size_t before = c.diagnostics.items().size();
  derive_batch(c, world_size);
  Diagnostics batch_problems;
  for (size_t i = before; i < c.diagnostics.items().size(); ++i) {
    const auto& d = c.diagnostics.items()[i];
    if (d.severity != Severity::kWarning) batch_problems.error(d.path, d.message, d.hint);
  }
  batch_problems.throw_if_errors(str("batch sizes at world size ", world_size));
  if (c.source_of("zero_optimization.overlap_comm") == Source::kDefault) {
    z.overlap_comm = z.effective_overlap_comm();
    c.sources["zero_optimization.overlap_comm"] = Source::kDerived;
  }
}

}  // namespace zerotrain::config
