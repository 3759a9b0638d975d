// What `zerotrain config check` accepts, the engine runs, and the other way round: every
// config of the conformance corpus (shared/conformance/ds_configs) goes through the checks
// `config check` runs at world size 1 and through initialize on a small model (its "auto"
// values filled with the Trainer's defaults, a client optimizer where the file has none,
// or with optimizer offload an AdamW block); and every key of the schema with a numeric
// range, one at a time, at the edges of its range and beyond them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/support/parity_model.h"
#include "zerotrain/config/config.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/engine/engine.h"

namespace {

namespace config = zerotrain::config;

// `config check FILE`: "" when it says OK, else its first problem.
std::string check_verdict(const std::filesystem::path& file) {
  config::Config c = config::load_config(config::read_json_file(file), {.origin = file.filename().string()});
  if (c.diagnostics.count(config::Severity::kError) == 0) config::derive_batch(c, 1);
  for (const auto& d : c.diagnostics.items()) {
    if (d.severity != config::Severity::kWarning) return d.to_string();
  }
  return "";
}

// A folder that exists, for the NVMe offload of the corpus's configs: their nvme_path names
// their authors' disks (/mnt/nvme0/...), which the engine refuses where they do not exist.
// That is a fact of the machine, not of the config, and `config check` judges the config.
const std::filesystem::path& nvme_folder() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("zt_check_agrees_nvme_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// initialize on a small model: "" when it starts, else why not.
std::string engine_verdict(const std::filesystem::path& file) {
  try {
    auto c = zerotrain::Config::from_file(file.string());
    for (auto* path : {c.zero_optimization.offload_param ? &c.zero_optimization.offload_param->nvme_path : nullptr,
                       c.zero_optimization.offload_optimizer ? &c.zero_optimization.offload_optimizer->nvme_path
                                                             : nullptr}) {
      if (path && *path && !(*path)->empty()) *path = nvme_folder().string();
    }
    // Offload steps its own fused Adam, so there a config without an optimizer gets an
    // AdamW block (as `zerotrain train` adds one), not a client optimizer.
    const auto& offload = c.zero_optimization.offload_optimizer;
    const bool offloads = offload && offload->enabled();
    if (offloads && !c.optimizer) {
      c.optimizer = zerotrain::Config::from_string(R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})").optimizer;
    }
    // The Trainer's arguments as a user of this config passes them: its precision flags.
    const config::TrainerArgs args{.fp16 = c.fp16_enabled(), .bf16 = c.bf16_enabled(), .num_training_steps = 10,
                                   .hidden_size = 16};
    if (!c.unresolved_auto_keys().empty()) config::resolve_auto(c, args);
    auto net = zerotrain::test::make_parity_net(false);
    zerotrain::InitOptions options{.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]};
    if (!c.optimizer) options.optimizer = std::make_shared<torch::optim::AdamW>(net->parameters());
    auto engine = zerotrain::initialize(net.ptr(), c, options);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(CheckAgreesWithEngine, OnEveryConformanceConfig) {
  // The corpus is read at run time: ZEROTRAIN_CONFORMANCE_DIR, else ../shared beside the clone.
  const char* given = std::getenv("ZEROTRAIN_CONFORMANCE_DIR");
  const std::filesystem::path corpus = given != nullptr ? given : ZEROTRAIN_CONFORMANCE_DIR;
  if (!std::filesystem::is_directory(corpus)) {
    GTEST_SKIP() << "skipped: ../shared/conformance not found (" << corpus.string() << " is not a directory)";
  }
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    if (entry.path().extension() != ".json") continue;
    const std::string check = check_verdict(entry.path());
    const std::string engine = engine_verdict(entry.path());
    EXPECT_EQ(check.empty(), engine.empty()) << entry.path().filename() << "\n  config check: "
                                             << (check.empty() ? "OK" : check) << "\n  initialize: "
                                             << (engine.empty() ? "starts" : engine);
    ++compared;
  }
  EXPECT_EQ(compared, 143);
  std::filesystem::remove_all(nvme_folder());
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Key by key: every key the schema gives a numeric range, at each edge of its range and just
// outside it (a key without an upper bound at a huge value), in a config that is otherwise
// valid, through `config check`'s path and through initialize. No value may be accepted by
// one and refused by the other; an edge is accepted by both, a value outside refused by both.
namespace {
namespace key_by_key {

// A key of the schema with a range: its JSON path, bounds, and whether it holds integers.
struct RangedKey {
  std::string path;
  std::optional<double> min, max;
  bool integer = false;
};

template <class T> constexpr bool kIntegerValue = std::is_same_v<T, int64_t>;
template <class T> constexpr bool kIntegerValue<config::Auto<T>> = kIntegerValue<T>;
template <class T> constexpr bool kIntegerValue<std::optional<T>> = kIntegerValue<T>;

// Walks a config's blocks like the reader does (the blocks a loaded config has, absent
// optional blocks with their defaults) and lists the keys declared with a min or a max.
class RangeCollector {
 public:
  static constexpr bool kReading = false;
  RangeCollector(std::string prefix, std::vector<RangedKey>& out) : prefix_(std::move(prefix)), out_(out) {}

  template <class T>
  void field(std::string_view key, T& member, const config::FieldOpts& opts = {}) {
    const std::string path = prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
    if constexpr (config::Block<T>) {
      RangeCollector child(path, out_);
      member.visit(child);
    } else if constexpr (config::OptionalBlock<T>) {
      typename T::value_type defaults;
      RangeCollector child(path, out_);
      (member ? *member : defaults).visit(child);
    } else if (opts.min || opts.max) {
      out_.push_back({path, opts.min, opts.max, kIntegerValue<T>});
    }
  }
  void deprecated(std::string_view, std::string_view, const std::function<void(const config::Json&)>&, bool = true) {}
  void removed(std::string_view, std::string_view, bool = false) {}
  void ignore(std::string_view) {}
  void feature_block(std::string_view, config::Json&, std::string_view) {}

 private:
  std::string prefix_;
  std::vector<RangedKey>& out_;
};

std::vector<RangedKey> ranged_keys(const config::Json& base) {
  auto c = zerotrain::Config::from_json(base);
  std::vector<RangedKey> keys;
  RangeCollector collector("", keys);
  c.visit(collector);
  return keys;
}

config::Json with_value(config::Json j, const std::string& path, const config::Json& value) {
  config::Json* at = &j;
  size_t begin = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; begin = dot + 1, dot = path.find('.', begin)) {
    config::Json& next = (*at)[path.substr(begin, dot - begin)];
    if (!next.is_object()) next = config::Json::object();
    at = &next;
  }
  (*at)[path.substr(begin)] = value;
  return j;
}

// `config check`: "" when it says OK, else its first problem; `range_refused` gets the path
// of each key whose range refused its value (not another check that names the key: partial
// offload below stage 3, a feature this build lacks).
std::string check_verdict(const config::Json& j, std::set<std::string>* range_refused = nullptr) {
  config::Config c = config::load_config(j, {.origin = "probe"});
  if (c.diagnostics.count(config::Severity::kError) == 0) config::derive_batch(c, 1);
  std::string first;
  for (const auto& d : c.diagnostics.items()) {
    if (d.severity == config::Severity::kWarning) continue;
    if (first.empty()) first = d.to_string();
    const bool range = d.message.rfind("must be between", 0) == 0 || d.message.rfind("must be at least", 0) == 0 ||
                       d.message.rfind("must be at most", 0) == 0;
    if (range_refused != nullptr && d.severity == config::Severity::kError && range) range_refused->insert(d.path);
  }
  return first;
}

// initialize on a small model (in the config's dtype): "" when it starts, else why not.
std::string engine_verdict(const config::Json& j) {
  try {
    auto c = zerotrain::Config::from_json(j);
    auto net = zerotrain::test::make_parity_net(false);
    if (c.fp16_enabled()) net->to(torch::kHalf);
    auto engine = zerotrain::initialize(
        net.ptr(), c, zerotrain::InitOptions{.comm = zerotrain::comm::Communicator::make_thread_world(1)[0]});
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

struct Probe {
  config::Json value;
  bool inside;        // within the declared range
  bool edge = true;   // a bound itself, or just beyond one: accepted exactly when inside
};

std::vector<Probe> probes(const RangedKey& k) {
  std::vector<Probe> out;
  if (k.integer) {
    if (k.min) {
      out.push_back({static_cast<int64_t>(*k.min), true});
      out.push_back({static_cast<int64_t>(*k.min) - 1, false});
    }
    if (k.max) {
      out.push_back({static_cast<int64_t>(*k.max), true});
      out.push_back({static_cast<int64_t>(*k.max) + 1, false});
    }
    // No upper bound: a huge value. Only agreement is asked of it: another key may bound it
    // (a warm-up longer than the schedule), and the two must then say so together.
    if (!k.max) out.push_back({int64_t{1} << 62, true, /*edge=*/false});
  } else {
    if (k.min) {
      out.push_back({*k.min, true});
      out.push_back({std::nextafter(*k.min, -HUGE_VAL), false});
    }
    if (k.max) {
      out.push_back({*k.max, true});
      out.push_back({std::nextafter(*k.max, HUGE_VAL), false});
    }
    if (!k.max) out.push_back({1e300, true, /*edge=*/false});
  }
  return out;
}

// Configs valid as they are, that together use every optimizer and schedule type, fp16, and
// NVMe offload of parameters and optimizer states (which reads the `aio` block).
std::vector<config::Json> bases(const std::string& nvme_dir) {
  using config::Json;
  const Json micro = {{"train_micro_batch_size_per_gpu", 1}};
  auto base = [&](Json extra) {
    Json j = micro;
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
  };
  return {
      base({{"fp16", {{"enabled", true}}}, {"zero_optimization", {{"stage", 1}}},
            {"optimizer", {{"type", "Adam"}, {"params", {{"lr", 0.001}}}}}, {"scheduler", {{"type", "WarmupLR"}, {"params", Json::object()}}}}),
      base({{"zero_optimization", {{"stage", 3}, {"offload_param", {{"device", "nvme"}, {"nvme_path", nvme_dir}}},
                                   {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", nvme_dir}}}}},
            {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.001}}}}},
            {"scheduler", {{"type", "WarmupDecayLR"}, {"params", {{"total_num_steps", 10}, {"warmup_num_steps", 0}}}}}}),
      base({{"optimizer", {{"type", "SGD"}, {"params", {{"lr", 0.1}}}}},
            {"scheduler", {{"type", "WarmupCosineLR"}, {"params", {{"total_num_steps", 10}, {"warmup_num_steps", 0}}}}}}),
      base({{"zero_optimization", {{"stage", 2}}}, {"optimizer", {{"type", "Adagrad"}, {"params", {{"lr", 0.01}}}}},
            {"scheduler", {{"type", "OneCycle"}, {"params", {{"cycle_min_lr", 0.0}, {"cycle_max_lr", 0.01}}}}}}),
      base({{"zero_optimization", {{"stage", 2}}}, {"optimizer", {{"type", "Lion"}, {"params", {{"lr", 0.0001}}}}},
            {"scheduler", {{"type", "LRRangeTest"}, {"params", Json::object()}}}}),
      base({{"optimizer", {{"type", "Lamb"}, {"params", {{"lr", 0.001}}}}}}),
  };
}

TEST(CheckAgreesWithEngine, OnEveryRangedKeyAtAndBeyondItsEdges) {
  const std::filesystem::path nvme_dir =
      std::filesystem::temp_directory_path() / ("zt_check_agrees_nvme_" + std::to_string(::getpid()));
  std::filesystem::create_directories(nvme_dir);
  const auto all = bases(nvme_dir.string());
  int probed = 0;
  std::set<std::string> covered;
  for (size_t b = 0; b < all.size(); ++b) {
    ASSERT_EQ(check_verdict(all[b]), "") << "base " << b;
    ASSERT_EQ(engine_verdict(all[b]), "") << "base " << b;
    for (const RangedKey& k : ranged_keys(all[b])) {
      // Every key in the first two (one with NVMe offload); the others add their optimizer's
      // and schedule's params.
      const bool typed = k.path.rfind("optimizer.params.", 0) == 0 || k.path.rfind("scheduler.params.", 0) == 0;
      if (b >= 2 && !typed) continue;
      covered.insert(k.path);
      for (const Probe& p : probes(k)) {
        const config::Json j = with_value(all[b], k.path, p.value);
        std::set<std::string> range_refused;
        const std::string check = check_verdict(j, &range_refused);
        const std::string engine = engine_verdict(j);
        EXPECT_EQ(check.empty(), engine.empty())
            << "base " << b << ", " << k.path << " = " << p.value.dump() << "\n  config check: "
            << (check.empty() ? "OK" : check) << "\n  initialize: " << (engine.empty() ? "starts" : engine);
        // At an edge the range itself must accept; another check may still refuse the value
        // (stage 0 beside parameter offload), which the agreement above covers.
        const bool range_refuses = range_refused.contains(k.path);
        if (p.edge && (!p.inside || range_refuses)) {
          EXPECT_EQ(check.empty(), p.inside) << "base " << b << ", " << k.path << " = " << p.value.dump() << ": "
                                             << (check.empty() ? "accepted" : check);
        }
        ++probed;
      }
    }
  }
  std::filesystem::remove_all(nvme_dir);
  // The keys that motivated the test, and a sample of every block.
  for (const char* key : {"aio.block_size", "aio.queue_depth", "aio.intra_op_parallelism", "fp16.initial_scale_power",
                          "zero_optimization.stage", "optimizer.params.momentum", "scheduler.params.cycle_first_step_size",
                          "scheduler.params.total_num_steps", "comm.timeout_s"}) {
    EXPECT_TRUE(covered.contains(key)) << key;
  }
  EXPECT_GT(probed, 150);
}

}  // namespace key_by_key
}  // namespace
