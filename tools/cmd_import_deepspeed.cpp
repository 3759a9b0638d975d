// `zerotrain checkpoint import-deepspeed DS_DIR OUT [--tag T]`: a DeepSpeed checkpoint into
// zerotrain's format (checkpoint/deepspeed/import.h), which `zerotrain train
// --resume_from_checkpoint OUT` or the engine's load_checkpoint then continues from.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include "tools/commands.h"
#include "zerotrain/checkpoint/deepspeed/import.h"
#include "zerotrain/checkpoint/writer.h"

namespace zerotrain::tools {
namespace {

struct ImportOptions {
  std::string ds_dir;
  std::string out_dir;
  std::string tag;
};

int run_import(const ImportOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  checkpoint::DeepSpeedImportOptions options;
  options.tag = opt.tag;
  options.note = [](const std::string& line) {
    std::cerr << "zerotrain checkpoint import-deepspeed: note: " << line << "\n";
  };
  const auto result = checkpoint::import_deepspeed(opt.ds_dir, opt.out_dir, options);
  const auto& m = result.manifest;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "imported " << result.tag_dir.string() << ": ZeRO stage " << m.zero_stage << ", world size "
            << m.world_size << ", " << m.model_dtype << ", " << m.params.size() << " parameters"
            << (m.optimizer_states.empty() ? " (no optimizer states)" : " with Adam's states") << ", step "
            << m.counters.global_steps << "; " << checkpoint::format_bytes(result.bytes_written) << " in " << std::fixed
            << std::setprecision(2) << seconds << " s\nresume with: zerotrain train ... --resume_from_checkpoint "
            << opt.out_dir << "\n";
  return 0;
}

}  // namespace

Command add_import_deepspeed_command(CLI::App& app) {
  CLI::App* parent = app.get_subcommand("checkpoint");
  auto* cmd = parent->add_subcommand(
      "import-deepspeed", "Convert a DeepSpeed checkpoint (ZeRO 0-3, any world size, fp32/bf16/fp16) into zerotrain's");
  auto opt = std::make_shared<ImportOptions>();
  cmd->add_option("ds_dir", opt->ds_dir, "DeepSpeed's save_checkpoint directory (with `latest`), or a tag directory")
      ->required();
  cmd->add_option("out_dir", opt->out_dir, "Where the zerotrain checkpoint goes (OUT/<tag>, OUT/latest)")->required();
  cmd->add_option("--tag", opt->tag, "The DeepSpeed tag to import (default: the one its `latest` names)");
  return {cmd, [opt] { return run_import(*opt); }};
}

}  // namespace zerotrain::tools
