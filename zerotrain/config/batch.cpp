#include "zerotrain/config/batch.h"

#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

using detail::str;

// A fix that keeps the values the user wrote and changes the one that was derived or is
// inconsistent: the nearest train_batch_size that micro_batch * world_size divides.
std::string divisibility_hint(int64_t tb, int64_t unit, const char* unit_text) {
  int64_t lower = (tb / unit) * unit, upper = 0;
  const bool has_upper = !__builtin_add_overflow(lower, unit, &upper);
  std::string choices = lower > 0 && has_upper ? str(lower, " or ", upper) : lower > 0 ? str(lower) : str(upper);
  return str("train_batch_size must be a multiple of ", unit_text, " = ", unit, "; use ", choices,
             ", or change the other values");
}

// The products the triangle forms from the values given (micro * accumulation * world and
// its parts) must fit in 64 bits; every other product it forms is at most train_batch_size.
// Checked before any arithmetic, so that no wrapped value reaches a message.
bool products_fit(const BatchInputs& in, int64_t ws, Diagnostics& diags) {
  struct Factor {
    const char* name;
    std::optional<int64_t> value;
  };
  const Factor factors[] = {{"train_micro_batch_size_per_gpu", in.micro_batch_per_gpu},
                            {"gradient_accumulation_steps", in.gradient_accumulation_steps},
                            {"world_size", ws}};
  int64_t product = 1;
  std::string names, values;
  for (const Factor& f : factors) {
    if (!f.value) continue;
    names += names.empty() ? f.name : str(" * ", f.name);
    values += values.empty() ? str(*f.value) : str(" * ", *f.value);
    if (__builtin_mul_overflow(product, *f.value, &product)) {
      diags.error(f.name == factors[2].name ? "train_micro_batch_size_per_gpu" : f.name,
                  str(names, " = ", values, " does not fit in a 64-bit integer"),
                  "use batch sizes whose product with the world size is below 2^63");
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<BatchSizes> derive_batch_sizes(const BatchInputs& in, int64_t ws, Diagnostics& diags) {
  if (ws < 1) {
    diags.error("", str("world size must be at least 1, got ", ws));
    return std::nullopt;
  }
  // A given value of 0 or less fails DeepSpeed's "> 0" assertions whatever is derived; said
  // here, before it could divide by zero or negate a derivation.
  bool positive = true;
  struct Given {
    const char* key;
    const char* deepspeed_name;   // as DeepSpeed's assertion spells it
    std::optional<int64_t> value;
  };
  for (const Given& g : {Given{"train_batch_size", "Train batch size", in.train_batch_size},
                         Given{"train_micro_batch_size_per_gpu", "Micro batch size per gpu", in.micro_batch_per_gpu},
                         Given{"gradient_accumulation_steps", "Gradient accumulation steps",
                               in.gradient_accumulation_steps}}) {
    if (g.value && *g.value <= 0) {
      diags.error(g.key, str(g.deepspeed_name, ": ", *g.value, " has to be greater than 0"));
      positive = false;
    }
  }
  if (!positive || !products_fit(in, ws, diags)) return std::nullopt;
  auto [tb, mb, gas] = in;
  const bool had_tb = tb.has_value(), had_mb = mb.has_value(), had_gas = gas.has_value();
  if (!tb && !mb) {
    diags.error("train_batch_size",
                "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided",
                "add \"train_micro_batch_size_per_gpu\" (samples per rank per step)");
    return std::nullopt;
  }
  if (tb && mb && !gas) {
    gas = *tb / *mb / ws;
  } else if (tb && gas && !mb) {
    mb = *tb / ws / *gas;
  } else if (mb && gas && !tb) {
    tb = *mb * *gas * ws;
  } else if (tb && !mb && !gas) {
    gas = 1;
    mb = *tb / ws;
  } else if (mb && !tb && !gas) {
    tb = *mb * ws;
    gas = 1;
  }

  bool ok = true;
  if (*tb <= 0) {
    diags.error("train_batch_size", str("Train batch size: ", *tb, " has to be greater than 0"));
    ok = false;
  }
  if (*mb <= 0) {
    diags.error("train_micro_batch_size_per_gpu",
                str("Micro batch size per gpu: ", *mb, " has to be greater than 0",
                    had_mb ? "" : str(" (derived as train_batch_size // world_size // gradient_accumulation_steps = ",
                                      *tb, " // ", ws, " // ", *gas, ")")),
                had_mb ? "" : divisibility_hint(*tb, ws * *gas, "world_size * gradient_accumulation_steps"));
    ok = false;
  }
  if (*gas <= 0) {
    diags.error("gradient_accumulation_steps",
                str("Gradient accumulation steps: ", *gas, " has to be greater than 0",
                    had_gas ? "" : str(" (derived as train_batch_size // train_micro_batch_size_per_gpu // world_size = ",
                                       *tb, " // ", *mb, " // ", ws, ")")),
                had_gas ? "" : divisibility_hint(*tb, *mb * ws, "micro_batch * world_size"));
    ok = false;
  }
  if (ok && *tb != *mb * *gas * ws) {
    std::string derived;
    if (!had_gas) derived = str(" (gradient_accumulation_steps derived as ", *tb, " // ", *mb, " // ", ws, ")");
    if (!had_mb) derived = str(" (train_micro_batch_size_per_gpu derived as ", *tb, " // ", ws, " // ", *gas, ")");
    diags.error("train_batch_size",
                str("train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size: ",
                    *tb, " != ", *mb, " * ", *gas, " * ", ws, derived),
                had_mb && had_gas && had_tb
                    ? str("use train_batch_size ", *mb * *gas * ws, ", or drop one of the three keys to derive it")
                    : divisibility_hint(*tb, had_mb ? *mb * ws : *gas * ws,
                                        had_mb ? "micro_batch * world_size" : "gradient_accumulation_steps * world_size"));
    ok = false;
  }
  if (!ok) return std::nullopt;
  return BatchSizes{*tb, *mb, *gas};
}

}  // namespace zerotrain::config
