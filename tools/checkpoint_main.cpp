// `zerotrain-checkpoint`: `zero-to-fp32` and `checkpoint inspect` without LibTorch. The
// `zerotrain` command links LibTorch, whose libraries and static initialisers take about
// 120 MB of memory before main; these two commands read files only, so on a machine where
// that matters (a login node consolidating a large model) this binary runs them in a few
// MB plus the largest tensor (docs/checkpoints-tools.md). Same subcommands, same exit codes.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <vector>

#include "tools/commands.h"
#include "tools/standard_descriptors.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/output_file.h"

ZEROTRAIN_OPEN_STANDARD_DESCRIPTORS_FIRST;

int main(int argc, char** argv) {
  namespace zt = zerotrain::tools;
  CLI::App app{"zerotrain-checkpoint: zerotrain's checkpoint tools without LibTorch", "zerotrain-checkpoint"};
  app.require_subcommand(1, 1);
  const std::vector<zt::Command> commands = {zt::add_zero_to_fp32_command(app), zt::add_checkpoint_command(app)};
  try {
    app.parse(argc, argv);
    for (const auto& command : commands) {
      if (!command.app->parsed()) continue;
      const int rc = command.run();
      zerotrain::files::check_standard_output();
      return rc;
    }
    return 2;
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) != 0) return 2;
    // --help: its text is the command's output, checked like any command's.
    try {
      zerotrain::files::check_standard_output();
      return 0;
    } catch (const zerotrain::Error& io) {
      std::fprintf(stderr, "zerotrain-checkpoint: %s\n", io.what());
      return io.exit_code();
    }
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "zerotrain-checkpoint: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "zerotrain-checkpoint: %s\n", zerotrain::ResourceError("out of memory").what());
    return zerotrain::ResourceError("").exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zerotrain-checkpoint: [internal] %s\n", e.what());
    return zerotrain::InternalError("").exit_code();
  }
}
