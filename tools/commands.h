// The `zerotrain` subcommands. Each registers its options on the CLI11 app and returns the
// function that runs it; main.cpp alone turns exceptions into exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace zerotrain::tools {

struct Command {
  CLI::App* app;                 // the subcommand, to see whether it was chosen
  std::function<int()> run;      // returns the exit code
};

// `zerotrain launch [OPTIONS] [--] PROGRAM ARGS...`: removes PROGRAM ARGS from `args`
// (the whole command line) and returns them, so that CLI11 never sees the program's own
// flags. The program starts after "--", or at the first word that is not a launch option
// or an option's value. Returns nothing for other subcommands.
std::vector<std::string> split_launch_program(std::vector<std::string>& args);
void set_launch_program(std::vector<std::string> program);

Command add_report_command(CLI::App& app);
Command add_config_command(CLI::App& app);
Command add_launch_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_estimate_command(CLI::App& app);
Command add_advise_command(CLI::App& app);
Command add_zero_to_fp32_command(CLI::App& app);
Command add_checkpoint_command(CLI::App& app);
// `checkpoint import-deepspeed`, under the `checkpoint` command add_checkpoint_command made.
Command add_import_deepspeed_command(CLI::App& app);
Command add_io_bench_command(CLI::App& app);

// One line: "zerotrain 0.1.0 (LibTorch 2.15.0, GNU 12.2.0, RelWithDebInfo)".
std::string version_line();

}  // namespace zerotrain::tools
