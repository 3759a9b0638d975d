// `zerotrain config check FILE|- [--world_size N] [--json] [--allow_unknown_keys]`:
// validate a ds_config.json and print the effective config with each value's source, or
// every problem found (exit 3; 4 when the only problems are unsupported features).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "zerotrain/config/config.h"
#include "zerotrain/config/effective.h"
#include "zerotrain/config/json_text.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/escape.h"

namespace zerotrain::tools {
namespace {

using config::Json;

struct CheckOptions {
  std::string file;
  int64_t world_size = 1;
  bool json = false;
  bool allow_unknown_keys = false;
  bool effective = false;   // every key, not only those that are not defaults
};

const char* severity_name(config::Severity s) {
  switch (s) {
    case config::Severity::kError: return "error";
    case config::Severity::kNotSupported: return "not supported";
    case config::Severity::kWarning: return "warning";
  }
  return "?";
}

int exit_code_for(const config::Diagnostics& diags) {
  if (diags.count(config::Severity::kError) > 0) return ConfigError("").exit_code();
  if (diags.count(config::Severity::kNotSupported) > 0) return NotSupported("").exit_code();
  return 0;
}

// "-": the config comes on standard input (`... | zerotrain config check -`), bounded as a
// file is: what is beyond the bound is refused, not read.
Json read_config(const std::string& file) {
  if (file != "-") return config::read_json_file(file);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    ZT_CHECK(n >= 0, ConfigError, "standard input: cannot read the config: ", std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    ZT_CHECK(static_cast<int64_t>(text.size()) <= config::kMaxJsonBytes, ConfigError,
             "standard input: the config is more than ", config::kMaxJsonBytes, " bytes; a ds_config is far smaller");
  }
  ZT_CHECK(!text.empty(), ConfigError, "standard input: no config came (it was empty); pipe one in, e.g. "
           "cat ds_config.json | zerotrain config check -");
  return config::parse_json_text(text, "standard input");
}

int run_check(const CheckOptions& opt) {
  ZT_CHECK(opt.world_size >= 1, UsageError, "--world_size must be at least 1, got ", opt.world_size);
  const std::string name = opt.file == "-" ? "standard input" : opt.file;   // in the report
  Json input;
  try {
    input = read_config(opt.file);   // a syntax error stops here: nothing else to check
  } catch (const ConfigError& e) {
    if (!opt.json) throw;
    Json out = {{"file", opt.file}, {"world_size", opt.world_size}, {"ok", false},
                {"problems", Json::array({{{"severity", "error"}, {"path", ""}, {"message", e.message()}, {"hint", ""}}})}};
    std::cout << out.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";   // a path need not be UTF-8
    return e.exit_code();
  }
  config::LoadOptions load{.allow_unknown_keys = opt.allow_unknown_keys, .origin = name};
  config::Config cfg = config::load_config(input, load);
  // The batch triangle is checked unless the config is broken: a request for a feature this
  // build lacks does not hide a batch problem.
  if (cfg.diagnostics.count(config::Severity::kError) == 0) config::derive_batch(cfg, opt.world_size);
  const auto& diags = cfg.diagnostics;
  const int rc = exit_code_for(diags);


  if (opt.json) {
    Json out;
    out["file"] = opt.file;
    out["world_size"] = opt.world_size;
    out["ok"] = rc == 0;
    out["problems"] = Json::array();
    for (const auto& d : diags.items()) {
      out["problems"].push_back(
          {{"severity", severity_name(d.severity)}, {"path", d.path}, {"message", d.message}, {"hint", d.hint}});
    }
    if (rc == 0) {
      out["config"] = cfg.to_json();
      for (const auto& [path, value] : config::flatten(out["config"])) {
        out["sources"][path] = config::to_string(cfg.source_of(path));
      }
    }
    std::cout << out.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";   // a path need not be UTF-8
    return rc;
  }

  std::ostream& report = rc == 0 ? std::cout : std::cerr;
  size_t problems = diags.count(config::Severity::kError) + diags.count(config::Severity::kNotSupported);
  if (rc != 0) {
    report << strings::escape_for_display(name) << ": " << problems << (problems == 1 ? " problem" : " problems")
           << "\n";
  } else {
    report << strings::escape_for_display(name) << ": OK at world size " << opt.world_size << "\n";
  }
  // Diagnostics quote the file's keys and values: escaped as every error message is.
  for (const auto& d : diags.items()) {
    report << "  " << severity_name(d.severity) << ": " << strings::escape_for_display(d.to_string()) << "\n";
  }
  if (rc != 0) return rc;

  if (opt.effective) {
    std::cout << "\neffective config (value [source]):\n" << config::effective_table(cfg);
  } else {
    // What the engine logs at start-up: the values that are not defaults, by source.
    std::cout << "\nvalues that are not defaults (every key: --effective):\n" << config::non_default_block(cfg) << "\n";
  }
  return 0;
}

}  // namespace

Command add_config_command(CLI::App& app) {
  auto* sub = app.add_subcommand("config", "Work with DeepSpeed config files");
  sub->require_subcommand(1);
  auto* check = sub->add_subcommand("check", "Validate a ds_config.json and print the effective config");
  auto opt = std::make_shared<CheckOptions>();
  check->add_option("file", opt->file,
                    "The DeepSpeed config (JSON; comments and trailing commas allowed); - reads it from standard input")
      ->required();
  check->add_option("--world_size,--world-size", opt->world_size,
                    "Data-parallel world size for the batch-size triangle (default 1)");
  check->add_flag("--json", opt->json, "Print one JSON object (problems, config, sources)");
  check->add_flag("--effective", opt->effective,
                  "Print every key of the effective config with its source (default: the values that are not "
                  "defaults)");
  check->add_flag("--allow_unknown_keys,--allow-unknown-keys", opt->allow_unknown_keys,
                  "Treat unknown keys as warnings (configs for a newer DeepSpeed)");
  return {sub, [opt] { return run_check(*opt); }};
}

}  // namespace zerotrain::tools
