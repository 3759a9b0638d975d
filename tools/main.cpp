// The `zerotrain` command. The only place that maps exceptions to exit codes:
//   0 success, 1 other error, 2 usage, 3 config, 4 not supported, 5 comm, 6 timeout,
//   7 io, 8 checkpoint, 9 numerics, 10 resources, 70 internal (a bug). See docs/errors.md.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <sstream>
#include <vector>

#include "tools/commands.h"
#include "tools/standard_descriptors.h"
#include "tools/typed_errors.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/escape.h"
#include "zerotrain/core/output_file.h"

ZEROTRAIN_OPEN_STANDARD_DESCRIPTORS_FIRST;

int main(int argc, char** argv) {
  namespace zt = zerotrain::tools;
  CLI::App app{"zerotrain: DeepSpeed's ZeRO training engine in C++ on LibTorch", "zerotrain"};
  app.set_version_flag("--version", zt::version_line());
  app.require_subcommand(0, 1);
  std::vector<zt::Command> commands = {zt::add_report_command(app), zt::add_config_command(app),
                                       zt::add_launch_command(app), zt::add_train_command(app),
                                       zt::add_estimate_command(app), zt::add_advise_command(app),
                                       zt::add_zero_to_fp32_command(app), zt::add_checkpoint_command(app),
                                       zt::add_import_deepspeed_command(app),
                                       zt::add_io_bench_command(app)};
  try {
    // The launched program's own arguments never go through CLI11.
    std::vector<std::string> args(argv, argv + argc);
    zt::set_launch_program(zt::split_launch_program(args));
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);   // CLI11 wants them reversed
    app.parse(reversed);
    for (const auto& command : commands) {
      if (command.app->parsed()) {
        const int rc = command.run();
        zerotrain::files::check_standard_output();
        return rc;
      }
    }
    std::cout << app.help();
    return 2;
  } catch (const CLI::ParseError& e) {
    // CLI11's messages quote the command line: escaped like every zerotrain error's.
    std::ostringstream help, problem;
    const int parse_rc = app.exit(e, help, problem);
    std::cout << help.str();
    std::cerr << zerotrain::strings::escape_for_display(problem.str());
    if (parse_rc != 0) return 2;
    // --help and --version: their text is the command's output, checked like any command's.
    try {
      zerotrain::files::check_standard_output();
      return 0;
    } catch (const zerotrain::Error& io) {
      std::fprintf(stderr, "zerotrain: %s\n", io.what());
      return io.exit_code();
    }
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "zerotrain: %s\n", e.what());
    return e.exit_code();
  } catch (...) {
    const auto typed = zt::as_typed_error(std::current_exception());
    std::fprintf(stderr, "zerotrain: %s\n", typed->what());
    return typed->exit_code();
  }
}
