// The `zerotrain` command. The only place that maps exceptions to exit codes:
//   0 success, 1 other error, 2 usage, 3 config, 4 not supported, 5 comm, 6 timeout,
//   7 io, 8 checkpoint, 9 numerics, 10 resources, 70 internal (a bug). See docs/errors.md.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <vector>

#include "tools/commands.h"
#include "tools/typed_errors.h"
#include "zerotrain/core/error.h"

int main(int argc, char** argv) {
  namespace zt = zerotrain::tools;
  CLI::App app{"zerotrain: DeepSpeed's ZeRO training engine in C++ on LibTorch", "zerotrain"};
  app.set_version_flag("--version", zt::version_line());
  app.require_subcommand(0, 1);
  std::vector<zt::Command> commands = {zt::add_report_command(app), zt::add_config_command(app),
                                       zt::add_launch_command(app), zt::add_train_command(app),
                                       zt::add_estimate_command(app), zt::add_advise_command(app),
                                       zt::add_zero_to_fp32_command(app), zt::add_checkpoint_command(app),
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
        // Output that could not be written (a full disk, a closed pipe) is a failure, not
        // a success that printed nothing.
        std::cout.flush();
        ZT_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good(), zerotrain::IoError,
                 "cannot write the standard output: ", std::strerror(errno));
        return rc;
      }
    }
    std::cout << app.help();
    return 2;
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "zerotrain: %s\n", e.what());
    return e.exit_code();
  } catch (...) {
    const auto typed = zt::as_typed_error(std::current_exception());
    std::fprintf(stderr, "zerotrain: %s\n", typed->what());
    return typed->exit_code();
  }
}
