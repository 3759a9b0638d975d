#include "zerotrain/config/schema_optim.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "zerotrain/core/strings.h"

namespace zerotrain::config {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

struct Known {
  const char* name;
  int kind;
  int params_index;
};

constexpr Known kOptimizers[] = {
    {"adam", static_cast<int>(OptimizerKind::kAdam), 0},
    {"adamw", static_cast<int>(OptimizerKind::kAdamW), 0},
    {"lamb", static_cast<int>(OptimizerKind::kLamb), 1},
    {"sgd", static_cast<int>(OptimizerKind::kSgd), 2},
    {"adagrad", static_cast<int>(OptimizerKind::kAdagrad), 3},
    {"lion", static_cast<int>(OptimizerKind::kLion), 4},
};
constexpr const char* kOptimizerSpellings = "Adam, AdamW, Lamb, SGD, Adagrad and Lion";

// Valid DeepSpeed optimizers zerotrain does not implement: DeepSpeed's 1-bit and muP
// families, and the other torch.optim classes DeepSpeed would look up by name.
constexpr const char* kOtherOptimizers[] = {
    "onebitadam", "zerooneadam", "onebitlamb", "muadam", "muadamw", "musgd",
    "asgd", "adadelta", "adafactor", "adamax", "lbfgs", "nadam", "radam", "rmsprop",
    "rprop", "sparseadam", "muon"};

constexpr Known kSchedulers[] = {
    {"WarmupLR", static_cast<int>(SchedulerKind::kWarmupLR), 0},
    {"WarmupDecayLR", static_cast<int>(SchedulerKind::kWarmupDecayLR), 1},
    {"WarmupCosineLR", static_cast<int>(SchedulerKind::kWarmupCosineLR), 2},
    {"OneCycle", static_cast<int>(SchedulerKind::kOneCycle), 3},
    {"LRRangeTest", static_cast<int>(SchedulerKind::kLRRangeTest), 4},
};

// torch.optim.lr_scheduler classes, which DeepSpeed also accepts by name.
constexpr const char* kTorchSchedulers[] = {
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
    "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau",
    "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"};

}  // namespace

TypeResolution resolve_optimizer_type(const std::string& type) {
  // DeepSpeed lower-cases the names of its own optimizers; torch.optim names are
  // case-sensitive there ("SGD"). We accept every spelling case-insensitively.
  const std::string name = lower(type);
  for (const auto& k : kOptimizers) {
    if (name == k.name) return {.kind = k.kind, .params_index = k.params_index};
  }
  for (const char* other : kOtherOptimizers) {
    if (name == other) {
      return {.not_supported = true,
              .message = "optimizer \"" + type + "\" is not implemented by zerotrain",
              .hint = std::string("use one of ") + kOptimizerSpellings};
    }
  }
  std::vector<std::string> names = {"Adam", "AdamW", "Lamb", "SGD", "Adagrad", "Lion"};
  auto near = strings::closest_match(type, names);
  return {.message = "unknown optimizer type \"" + type + "\"",
          .hint = (near ? "did you mean " + *near + "? " : std::string()) + "known: " + kOptimizerSpellings};
}

TypeResolution resolve_scheduler_type(const std::string& type) {
  // DeepSpeed looks scheduler names up case-sensitively; we do too, and suggest the fix.
  for (const auto& k : kSchedulers) {
    if (type == k.name) return {.kind = k.kind, .params_index = k.params_index};
  }
  for (const char* other : kTorchSchedulers) {
    if (type == other) {
      return {.not_supported = true,
              .message = "torch scheduler \"" + type + "\" is not implemented by zerotrain",
              .hint = "use WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest"};
    }
  }
  std::vector<std::string> names;
  for (const auto& k : kSchedulers) names.emplace_back(k.name);
  auto near = strings::closest_match(type, names);
  return {.message = "unknown scheduler type \"" + type + "\"",
          .hint = (near ? "did you mean " + *near + "? " : std::string()) +
                  "known: WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest"};
}

}  // namespace zerotrain::config
