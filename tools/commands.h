// The `zerotrain` subcommands. Each registers its options on the CLI11 app and returns the
// function that runs it; main.cpp alone turns exceptions into exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace zerotrain::tools {

struct Command {
  CLI::App* app;                 // the subcommand, to see whether it was chosen
  std::function<int()> run;      // returns the exit code
};

Command add_report_command(CLI::App& app);
Command add_config_command(CLI::App& app);
Command add_launch_command(CLI::App& app);

// One line: "zerotrain 0.1.0 (LibTorch 2.15.0, GNU 12.2.0, RelWithDebInfo)".
std::string version_line();

}  // namespace zerotrain::tools
