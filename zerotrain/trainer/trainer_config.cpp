#include "zerotrain/trainer/trainer_config.h"

#include <filesystem>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/config/effective.h"
#include "zerotrain/config/json_text.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"

namespace zerotrain::trainer {

using config::Json;
namespace {

// What HF's Trainer does without DeepSpeed, as a ds_config: its batch, gradient clipping
// (max_grad_norm) and precision (--fp16/--bf16); the optimizer and scheduler blocks are added
// from the arguments as for any config without them.
Json config_without_deepspeed() {
  return {{"train_batch_size", "auto"},
          {"train_micro_batch_size_per_gpu", "auto"},
          {"gradient_accumulation_steps", "auto"},
          {"gradient_clipping", "auto"},
          {"fp16", {{"enabled", "auto"}}},
          {"bf16", {{"enabled", "auto"}}}};
}

}  // namespace

Config trainer_config(const TrainingArguments& args) {
  const bool has_file = !args.deepspeed.empty();
  Json json = has_file ? config::read_json_file(args.deepspeed) : config_without_deepspeed();
  const std::string origin = has_file ? args.deepspeed : "the config without --deepspeed";
  bool stage_from_flag = false;
  if (args.zero_stage) {
    const Json* written = nullptr;
    if (json.is_object() && json.contains("zero_optimization") && json["zero_optimization"].is_object() &&
        json["zero_optimization"].contains("stage")) {
      written = &json["zero_optimization"]["stage"];
    }
    if (written) {
      // A stage the file sets and the flag contradicts: which one was meant is not ours to guess.
      ZT_CHECK(written->is_number_integer() && written->get<int64_t>() == *args.zero_stage, UsageError,
               "--zero_stage ", *args.zero_stage, " but ", args.deepspeed, " sets zero_optimization.stage ",
               written->dump(), ": drop --zero_stage, or make the file's stage agree");
    } else if (json.is_object()) {
      // DeepSpeed's old boolean form ("zero_optimization": true) has no stage to fill.
      ZT_CHECK(!json.contains("zero_optimization") || json["zero_optimization"].is_object(), UsageError,
               "--zero_stage ", *args.zero_stage, " but ", args.deepspeed, " has \"zero_optimization\": ",
               json["zero_optimization"].dump(), ", not a block: write {\"stage\": ", *args.zero_stage,
               "} there, or drop --zero_stage");
      json["zero_optimization"]["stage"] = *args.zero_stage;
      stage_from_flag = true;
    }
  }
  Config config = Config::from_json(json, {.origin = origin});
  if (has_file) files::register_input(args.deepspeed, "config file");   // no output may be written over it
  if (stage_from_flag) config.sources["zero_optimization.stage"] = config::Source::kArgument;
  return config;
}

void write_effective_config(const Config& config, const std::string& output_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  ZT_CHECK(!ec && fs::is_directory(output_dir, ec), IoError, "--output_dir ", output_dir, ": cannot create it (",
           ec ? ec.message() : std::string("not a directory"), "); give a directory this job can write");
  const fs::path path = fs::path(output_dir) / "effective_config.json";
  files::check_output_file(path, {.what = "effective_config.json"});   // a link or a FIFO there is refused
  checkpoint::AtomicFile file(path);
  file.write(config::effective_json(config).dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  file.commit();
}

}  // namespace zerotrain::trainer
