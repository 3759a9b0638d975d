// `zerotrain zero-to-fp32` and `zerotrain checkpoint inspect` (docs/checkpoints-tools.md):
// consolidate a sharded checkpoint into safetensors files, streaming; say what a checkpoint
// holds and whether it is complete and intact. No LibTorch: both work on the files alone.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "tools/commands.h"
#include "zerotrain/checkpoint/consolidate.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::tools {
namespace {

namespace ckpt = checkpoint;
namespace fs = std::filesystem;
using Json = config::Json;

struct ZeroToFp32Options {
  std::string checkpoint_dir;
  std::string output_dir;
  std::string tag;
  std::string max_shard_size = "5GB";
  std::string dtype = "fp32";
  std::string hf_config;   // a Hugging Face model folder whose config files go with the weights
};

struct InspectOptions {
  std::string checkpoint_dir;
  std::string tag;
  bool json = false;
};

// "1 buffer", "2 buffers"
std::string count(int64_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

ckpt::Dtype output_dtype(const std::string& name) {
  if (name == "fp32") return ckpt::Dtype::kF32;
  if (name == "bf16") return ckpt::Dtype::kBF16;
  if (name == "fp16") return ckpt::Dtype::kF16;
  throw UsageError("--dtype " + name + ": give fp32, bf16 or fp16 (the dtype the parameters are written in)");
}

// The files of a Hugging Face model folder besides its weights, as save_pretrained writes
// them: config.json (required) and generation_config.json (where the model has one).
constexpr const char* kHfConfigFiles[] = {"config.json", "generation_config.json"};

// --hf_config's folder has a config.json (UsageError otherwise), checked before the
// checkpoint is read.
void check_hf_config(const std::string& dir) {
  std::error_code ec;
  const fs::path config = fs::path(dir) / kHfConfigFiles[0];
  ZT_CHECK(fs::is_regular_file(config, ec), UsageError, "--hf_config ", dir, ": ", config.string(),
           " is missing; give the folder of the Hugging Face model that was trained (the one from_pretrained read), "
           "or write its config there first (model.config.save_pretrained(dir))");
}

// Copies the folder's config files into `out_dir`, each whole or not at all.
std::vector<fs::path> copy_hf_config(const std::string& dir, const std::string& out_dir) {
  std::vector<fs::path> copied;
  for (const char* name : kHfConfigFiles) {
    const fs::path from = fs::path(dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    const std::string text = files::InputFile(from, {.what = "Hugging Face config file"}).read_all();
    ckpt::AtomicFile out(fs::path(out_dir) / name);
    out.write(text);
    out.commit();
    copied.push_back(out.path());
  }
  return copied;
}

int run_zero_to_fp32(const ZeroToFp32Options& opt) {
  // The command line is checked before the checkpoint is touched.
  ckpt::ConsolidateOptions options{.dtype = output_dtype(opt.dtype),
                                   .max_shard_bytes = strings::parse_bytes(opt.max_shard_size, "--max_shard_size")};
  ZT_CHECK(options.max_shard_bytes >= 1, UsageError, "--max_shard_size ", opt.max_shard_size,
           ": give a positive size, such as 5GB (the default, DeepSpeed's)");
  if (!opt.hf_config.empty()) check_hf_config(opt.hf_config);
  const ckpt::LocatedTag located = ckpt::locate_tag(opt.checkpoint_dir, opt.tag);
  ckpt::CheckpointReader reader(located.tag_dir);
  const ckpt::Manifest& m = reader.manifest();
  std::cout << "consolidating " << located.tag_dir.string() << " (saved by " << m.world_size << " rank"
            << (m.world_size == 1 ? "" : "s") << " at ZeRO stage " << m.zero_stage << ", " << m.model_dtype
            << ") into " << opt.output_dir << " as " << opt.dtype << std::endl;
  const ckpt::ConsolidatedOutput out = ckpt::consolidate(reader, opt.output_dir, options);
  const std::vector<fs::path> configs =
      opt.hf_config.empty() ? std::vector<fs::path>{} : copy_hf_config(opt.hf_config, opt.output_dir);

  int64_t params = 0, frozen = 0, buffers = 0, numel = 0;
  for (const auto& t : out.plan.tensors) {
    params += t.kind == ckpt::PlannedTensor::Kind::kParam;
    frozen += t.kind == ckpt::PlannedTensor::Kind::kFrozen;
    buffers += t.kind == ckpt::PlannedTensor::Kind::kBuffer;
    if (t.kind != ckpt::PlannedTensor::Kind::kBuffer) numel += t.numel();
  }
  std::cout << "  " << count(params, "parameter") << ", " << frozen << " frozen, " << count(buffers, "buffer") << ": "
            << numel << " parameter elements, " << checkpoint::format_bytes(out.plan.output.total_tensor_bytes) << " of tensors\n";
  for (const fs::path& f : out.files) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    std::cout << "  wrote " << f.string() << " (" << (ec ? std::string("?") : checkpoint::format_bytes(static_cast<int64_t>(size)))
              << ")\n";
  }
  for (const fs::path& f : configs) std::cout << "  copied " << f.string() << " (from --hf_config)\n";
  for (const fs::path& f : out.removed) std::cout << "  removed " << f.string() << " (from an earlier consolidation)\n";
  std::cout << "  read one tensor at a time: a buffer of " << checkpoint::format_bytes(out.plan.buffer_bytes)
            << " (the largest tensor as saved)\n";
  return 0;
}

// ---- checkpoint inspect ----

Json describe_files(const ckpt::CheckpointReader& reader, bool& complete) {
  Json files = Json::array();
  complete = true;
  for (const ckpt::FileRecord& f : reader.manifest().files) {
    std::error_code ec;
    const fs::path path = reader.dir() / f.name;
    const bool present = fs::is_regular_file(path, ec);
    const int64_t size = present ? static_cast<int64_t>(fs::file_size(path, ec)) : -1;
    complete = complete && present && size == f.bytes;
    files.push_back({{"rank", f.rank}, {"name", f.name}, {"bytes", f.bytes}, {"present", present},
                     {"bytes_on_disk", present ? Json(size) : Json(nullptr)}});
  }
  return files;
}

Json inspect(const ckpt::LocatedTag& located, ckpt::CheckpointReader& reader) {
  const ckpt::Manifest& m = reader.manifest();
  Json report;
  report["tag_dir"] = located.tag_dir.string();
  report["tag"] = located.tag;
  report["tag_from_latest"] = located.from_latest;
  report["run"] = {{"zerotrain_version", m.zerotrain_version}, {"world_size", m.world_size},
                   {"zero_stage", m.zero_stage}, {"model_dtype", m.model_dtype}, {"optimizer", m.optimizer},
                   {"optimizer_states", m.optimizer_states}, {"lr_scheduler", m.lr_scheduler},
                   {"loss_scaler", m.loss_scaler},
                   {"counters", {{"global_steps", m.counters.global_steps}, {"global_samples", m.counters.global_samples},
                                 {"skipped_steps", m.counters.skipped_steps}, {"micro_steps", m.counters.micro_steps}}}};
  report["run"]["groups"] = Json::array();
  for (const auto& g : m.groups) {
    report["run"]["groups"].push_back(
        {{"name", g.name}, {"lr", g.lr}, {"weight_decay", g.weight_decay}, {"optimizer_steps", g.optimizer_steps}});
  }
  int64_t numel = 0, frozen_bytes = 0, buffer_bytes = 0;
  for (const auto& p : m.params) numel += p.numel();
  auto whole_bytes = [](const ckpt::WholeTensor& t) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const auto dtype = ckpt::dtype_from_tag(t.dtype);
    return dtype ? n * ckpt::dtype_size(*dtype) : 0;
  };
  for (const auto& t : m.frozen) frozen_bytes += whole_bytes(t);
  for (const auto& t : m.buffers) buffer_bytes += whole_bytes(t);
  report["parameters"] = {{"trained", m.params.size()}, {"trained_numel", numel}, {"fp32_bytes", numel * 4},
                          {"frozen", m.frozen.size()}, {"frozen_bytes", frozen_bytes},
                          {"buffers", m.buffers.size()}, {"buffer_bytes", buffer_bytes}};
  bool complete = false;
  report["files"] = describe_files(reader, complete);
  int64_t total = 0;
  for (const auto& f : m.files) total += f.bytes;
  report["files_bytes"] = total;
  report["complete"] = complete;
  const std::vector<std::string> problems = reader.verify_files();
  report["intact"] = complete && problems.empty();
  report["problems"] = problems;
  const ckpt::DirectoryListing listing = ckpt::list_directory(located.save_dir);
  report["other_tags"] = Json::array();
  for (const auto& t : listing.tags) {
    if (t != located.tag) report["other_tags"].push_back(t);
  }
  report["unfinished_saves"] = listing.unfinished;
  return report;
}

std::string words(const Json& list) {
  std::string out;
  for (const auto& w : list) out += (out.empty() ? "" : ", ") + w.get<std::string>();
  return out.empty() ? "none" : out;
}

void print_report(const Json& r, const fs::path& save_dir) {
  const Json& run = r["run"];
  std::cout << "checkpoint   " << r["tag_dir"].get<std::string>() << " (tag " << r["tag"].get<std::string>()
            << (r["tag_from_latest"].get<bool>() ? ", named by " + (save_dir / ckpt::kLatestName).string() : "")
            << ")\n";
  std::cout << "saved by     zerotrain " << run["zerotrain_version"].get<std::string>() << ": world size "
            << run["world_size"] << ", ZeRO stage " << run["zero_stage"] << ", model dtype "
            << run["model_dtype"].get<std::string>() << "\n";
  const Json& opt = run["optimizer"];
  std::cout << "optimizer    "
            << (opt.is_null() ? "a client optimizer (its state is not in the checkpoint)"
                              : opt.value("type", std::string("?")) + " " + opt.value("params", Json::object()).dump() +
                                    "; states: " + words(run["optimizer_states"]))
            << "\n";
  const Json& c = run["counters"];
  std::cout << "counters     global_steps " << c["global_steps"] << ", global_samples " << c["global_samples"]
            << ", skipped_steps " << c["skipped_steps"] << ", micro_steps " << c["micro_steps"] << "\n";
  const Json& sched = run["lr_scheduler"];
  std::cout << "schedule     "
            << (sched.is_null() ? std::string("none")
                                : sched.value("type", std::string("?")) + " at iteration " +
                                      sched.value("last_batch_iteration", Json()).dump())
            << "\n";
  const Json& scaler = run["loss_scaler"];
  std::cout << "loss scale   "
            << (scaler.is_null() ? std::string("none (no fp16)")
                                 : scaler.value("scale", Json()).dump() + " (iteration " +
                                       scaler.value("iteration", Json()).dump() + ", last overflow at iteration " +
                                       scaler.value("last_overflow_iteration", Json()).dump() + ")")
            << "\n";
  for (const auto& g : run["groups"]) {
    std::cout << "group        " << g["name"].get<std::string>() << ": lr " << g["lr"] << ", weight_decay "
              << g["weight_decay"] << ", " << g["optimizer_steps"] << " optimizer steps\n";
  }
  const Json& p = r["parameters"];
  std::cout << "parameters   " << p["trained"] << " trained (" << p["trained_numel"] << " elements, "
            << checkpoint::format_bytes(p["fp32_bytes"].get<int64_t>()) << " in fp32), " << p["frozen"] << " frozen ("
            << checkpoint::format_bytes(p["frozen_bytes"].get<int64_t>()) << "), " << count(p["buffers"].get<int64_t>(), "buffer")
            << " (" << checkpoint::format_bytes(p["buffer_bytes"].get<int64_t>()) << ")\n";
  std::cout << "files        " << r["files"].size() << " rank files, " << checkpoint::format_bytes(r["files_bytes"].get<int64_t>())
            << "\n";
  for (const auto& f : r["files"]) {
    std::cout << "               " << f["name"].get<std::string>() << "  "
              << (f["present"].get<bool>() ? checkpoint::format_bytes(f["bytes_on_disk"].get<int64_t>()) : std::string("MISSING"))
              << "\n";
  }
  if (r["intact"].get<bool>()) {
    std::cout << "status       complete and intact: every byte of " << r["files"].size()
              << " files matches the manifest's checksums\n";
  } else {
    std::cout << "status       " << (r["complete"].get<bool>() ? "complete but DAMAGED" : "INCOMPLETE") << ":\n";
    for (const auto& problem : r["problems"]) std::cout << "               " << problem.get<std::string>() << "\n";
  }
  std::cout << "other tags   " << words(r["other_tags"]) << "\n";
  if (!r["unfinished_saves"].empty()) {
    std::cout << "unfinished   " << words(r["unfinished_saves"]) << " in " << save_dir.string()
              << " (left by saves that stopped; safe to delete)\n";
  }
}

int run_inspect(const InspectOptions& opt) {
  const ckpt::LocatedTag located = ckpt::locate_tag(opt.checkpoint_dir, opt.tag);
  std::unique_ptr<ckpt::CheckpointReader> reader;
  try {
    reader = std::make_unique<ckpt::CheckpointReader>(located.tag_dir);
  } catch (const CheckpointError& e) {
    const ckpt::DirectoryListing listing = ckpt::list_directory(located.save_dir);
    throw CheckpointError(e.message() + "; complete tags in " + located.save_dir.string() + ": " +
                          (listing.tags.empty() ? std::string("none") : words(Json(listing.tags))));
  }
  const Json report = inspect(located, *reader);
  if (opt.json) {
    std::cout << report.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";   // a path need not be UTF-8
  } else {
    print_report(report, located.save_dir);
  }
  if (!report["intact"].get<bool>()) {
    std::cout.flush();
    const auto& problems = report["problems"];
    throw CheckpointError(located.tag_dir.string() + " is " + (report["complete"].get<bool>() ? "damaged" : "incomplete") +
                          ": " + (problems.empty() ? std::string("a rank file is missing") : problems[0].get<std::string>()) +
                          (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "") +
                          "; load an earlier tag");
  }
  return 0;
}

}  // namespace

Command add_zero_to_fp32_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("zero-to-fp32",
                                 "Consolidate a sharded checkpoint into safetensors files (DeepSpeed's zero_to_fp32.py)");
  auto opt = std::make_shared<ZeroToFp32Options>();
  cmd->add_option("checkpoint_dir", opt->checkpoint_dir,
                  "The directory the checkpoint was saved into (with `latest`), or a tag directory")
      ->required();
  cmd->add_option("output_dir", opt->output_dir,
                  "Where model.safetensors (or its shards and model.safetensors.index.json) go; created")
      ->required();
  cmd->add_option("--tag", opt->tag, "The tag to consolidate (default: the one `latest` names)");
  cmd->add_option("--max_shard_size,--max-shard-size", opt->max_shard_size,
                  "The largest shard: 5GB (the default), 500MB, 2GiB, ...");
  cmd->add_option("--dtype", opt->dtype, "The parameters' dtype: fp32 (the default), bf16 or fp16");
  cmd->add_option("--hf_config,--hf-config", opt->hf_config,
                  "A Hugging Face model folder: its config.json (required) and generation_config.json go into "
                  "output_dir, which from_pretrained then loads");
  return {cmd, [opt] { return run_zero_to_fp32(*opt); }};
}

Command add_checkpoint_command(CLI::App& app) {
  auto* sub = app.add_subcommand("checkpoint", "Work with checkpoints");
  sub->require_subcommand(1);
  auto* cmd = sub->add_subcommand("inspect", "What a checkpoint holds, and whether it is complete and intact");
  auto opt = std::make_shared<InspectOptions>();
  cmd->add_option("checkpoint_dir", opt->checkpoint_dir,
                  "The directory the checkpoint was saved into (with `latest`), or a tag directory")
      ->required();
  cmd->add_option("--tag", opt->tag, "The tag to inspect (default: the one `latest` names)");
  cmd->add_flag("--json", opt->json, "Print one JSON object");
  return {cmd, [opt] { return run_inspect(*opt); }};
}

}  // namespace zerotrain::tools
