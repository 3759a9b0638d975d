// Reading the process environment: typed getters with errors that name the variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zerotrain::env {

std::optional<std::string> get(const char* name);
// An integer variable; throws ConfigError naming the variable when it is set but not an integer.
std::optional<int64_t> get_int(const char* name);
// A boolean variable: 1/true/yes/on or 0/false/no/off (any case); throws ConfigError otherwise.
std::optional<bool> get_bool(const char* name);

// This process's global rank as set by torchrun / DeepSpeed's launcher (RANK), Slurm
// (SLURM_PROCID) or OpenMPI (OMPI_COMM_WORLD_RANK), in that order; nullopt when none is set.
std::optional<int> rank_from_env();

}  // namespace zerotrain::env
