// zerotrain-mpi-rank: one rank of a `zerotrain launch` job under mpirun. The launcher runs
//   mpirun -np N zerotrain-mpi-rank --kill_grace_s G [--log_dir D] -- PROGRAM ARGS...
// and each copy supervises its rank like a local one (torchrun's variables, "[rank N] "
// prefixes, rank<N>.log), stops it when mpirun dies, and reports its failure to the
// launcher as a record (tools/launch/rank_report.h).
//
// It is its own small program, without LibTorch, because mpirun starts one per rank: the
// zerotrain command allocates ~55 MB while LibTorch initialises and takes ~0.3 s of CPU to
// start, which made 200 ranks of `sleep 5` take 63 s and 1000 ranks need ~55 GB.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "tools/launch/plan.h"
#include "tools/launch/reaper.h"
#include "tools/standard_descriptors.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

ZEROTRAIN_OPEN_STANDARD_DESCRIPTORS_FIRST;

namespace {

namespace zl = zerotrain::launch;

// The arguments the launcher gives (plan.cpp), so a mistake here is a bug there.
zl::LaunchOptions parse_arguments(int argc, char** argv) {
  zl::LaunchOptions options;
  options.mpi_rank_wrapper = true;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") {
      options.command.assign(argv + i + 1, argv + argc);
      return options;
    }
    if (word == "--no_local_rank") {
      options.no_local_rank = true;
      continue;
    }
    ZT_CHECK(i + 1 < argc, zerotrain::UsageError, "zerotrain-mpi-rank: ", word, " needs a value");
    const std::string value = argv[++i];
    if (word == "--kill_grace_s") {
      char* end = nullptr;
      options.kill_grace_s = std::strtod(value.c_str(), &end);
      ZT_CHECK(end != value.c_str() && *end == '\0' && std::isfinite(options.kill_grace_s) &&
                   options.kill_grace_s >= 0,
               zerotrain::UsageError, "zerotrain-mpi-rank: --kill_grace_s ", value, " is not a number of seconds");
    } else if (word == "--log_dir") {
      options.log_dir = value;
    } else if (word == "--visible_devices") {
      options.visible_devices = value;
    } else {
      throw zerotrain::UsageError("zerotrain-mpi-rank: unknown option " + word +
                                  "; usage: zerotrain-mpi-rank --kill_grace_s G [--log_dir D] [--no_local_rank] "
                                  "[--visible_devices LIST] -- PROGRAM ARGS...");
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // First of all: the process that started us (mpirun, or its orted on another host).
  const pid_t parent = ::getppid();
  // If mpirun dies, even by SIGKILL, we hear of it and stop the rank.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  int rank = 0;
  try {
    rank = static_cast<int>(zerotrain::env::get_int("OMPI_COMM_WORLD_RANK").value_or(0));
    // mpirun may have died before the prctl (even before `parent` was read), and then
    // nobody would tell us. Our parent is then init, or a subreaper: the launcher (it is the
    // subreaper of what mpirun leaves), or one above it (a container's init, systemd), so
    // `getppid() != 1` proves nothing. On the launcher's host it tells us its pid, and the
    // job is alive while our parent is not the launcher but descends from it.
    const auto launcher = zerotrain::env::get_int("ZEROTRAIN_LAUNCHER_PID");
    ::unsetenv("ZEROTRAIN_LAUNCHER_PID");   // not the rank's business
    const bool alive = ::getppid() == parent && parent != 1 &&
                       (!launcher || (parent != *launcher && zl::is_ancestor(static_cast<pid_t>(*launcher), parent)));
    ZT_CHECK(alive, zerotrain::CommError, "mpirun exited before rank ", rank, " could start");
    return zl::supervise(zl::plan_launch(parse_arguments(argc, argv)));
  } catch (const zerotrain::Error& e) {
    // Prefixed like the rank's own lines, so the launcher shows it at once.
    std::fprintf(stderr, "[rank %d] zerotrain-mpi-rank: %s\n", rank, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] zerotrain-mpi-rank: unexpected error: %s\n", rank, e.what());
    return 1;
  }
}
