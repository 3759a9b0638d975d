// What `zerotrain config check` accepts, the engine runs, and the other way round: every
// config of the conformance corpus (shared/conformance/ds_configs) goes through the checks
// `config check` runs at world size 1 and through initialize on a small model (its "auto"
// values filled with the Trainer's defaults, a client optimizer where the file has none,
// or with optimizer offload an AdamW block).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
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

// initialize on a small model: "" when it starts, else why not.
std::string engine_verdict(const std::filesystem::path& file) {
  try {
    auto c = zerotrain::Config::from_file(file.string());
    // Offload steps its own fused Adam, so there a config without an optimizer gets an
    // AdamW block (as `zerotrain train` adds one), not a client optimizer.
    const auto& offload = c.zero_optimization.offload_optimizer;
    const bool offloads = offload && offload->device != config::OffloadDevice::kNone;
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
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ZEROTRAIN_CONFORMANCE_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const std::string check = check_verdict(entry.path());
    const std::string engine = engine_verdict(entry.path());
    EXPECT_EQ(check.empty(), engine.empty()) << entry.path().filename() << "\n  config check: "
                                             << (check.empty() ? "OK" : check) << "\n  initialize: "
                                             << (engine.empty() ? "starts" : engine);
    ++compared;
  }
  EXPECT_EQ(compared, 143);
}

}  // namespace
