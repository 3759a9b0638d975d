// libFuzzer target for the config reader: bytes -> parse_json_text -> Config::from_json
// (strict, and with unknown keys allowed) -> the batch triangle at world sizes 1 and 3 ->
// finalize, as written and with "auto" filled from default Trainer arguments.
//
// A zerotrain::Error is the reader's answer to bad input, so it is caught. Anything else
// escapes on purpose: another exception type reaches std::terminate, and libFuzzer reports
// the abort like a crash or an ASan/UBSan/LSan report (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "zerotrain/config/config.h"
#include "zerotrain/config/json_text.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/error.h"

namespace {

namespace cfg = zerotrain::config;

template <class F>
void expecting_errors(F&& step) {
  try {
    step();
  } catch (const zerotrain::Error&) {
  }
}

// Formats what loading found, as `zerotrain config check` would print it.
void render(const cfg::Config& config) {
  for (const auto& d : config.diagnostics.items()) (void)d.to_string();
  (void)config.to_json().dump(2);
}

void run_stages(const cfg::Json& json, bool allow_unknown_keys) {
  cfg::Config loaded;
  try {
    loaded = cfg::Config::from_json(json, {.allow_unknown_keys = allow_unknown_keys, .origin = "<fuzz>"});
  } catch (const zerotrain::Error&) {
    return;
  }
  render(loaded);
  for (int64_t world_size : {1, 3}) {
    cfg::Config config = loaded;
    expecting_errors([&] { cfg::derive_batch(config, world_size); });
    render(config);
  }
  // finalize as written (a config without "auto"), and after the Trainer filled "auto".
  cfg::Config finalized = loaded;
  expecting_errors([&] { cfg::finalize(finalized, 3); });
  cfg::Config resolved = loaded;
  expecting_errors([&] {
    cfg::resolve_auto(resolved, cfg::TrainerArgs{});
    cfg::finalize(resolved, 3);
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The warnings of every accepted input would flood the output and slow the run; a
  // ZEROTRAIN_LOG_LEVEL given by the caller wins.
  setenv("ZEROTRAIN_LOG_LEVEL", "off", /*overwrite=*/0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  cfg::Json json;
  try {
    json = cfg::parse_json_text(text, "<fuzz>");
  } catch (const zerotrain::Error&) {
    return 0;
  }
  run_stages(json, /*allow_unknown_keys=*/false);
  run_stages(json, /*allow_unknown_keys=*/true);
  return 0;
}
