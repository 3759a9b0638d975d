// DeepSpeed's resource selection: the hostfile ("hostname slots=N" per line), and the
// --include / --exclude filters (NODE_SPEC[@NODE_SPEC...], NODE_SPEC = NAME[:SLOT[,SLOT...]]).
// Same formats and the same errors as deepspeed/launcher/runner.py, with messages that
// say which line or host is wrong.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::launch {

struct HostSlots {
  std::string host;
  std::vector<int> slots;   // slot ids, ascending (0..N-1 from the hostfile)
};
using WorldInfo = std::vector<HostSlots>;   // in hostfile order

// Throws UsageError naming the file and line for a bad entry, a repeated host or an empty file.
WorldInfo parse_hostfile(std::string_view text, std::string_view origin);
WorldInfo read_hostfile(const std::filesystem::path& path);

struct SelectOptions {
  std::string include;   // "" = everything
  std::string exclude;
  int num_nodes = -1;    // first N hosts (-1: all)
  int slots_per_node = -1;   // first N slots on every host (-1: all)
};
// Applies the filters; throws UsageError for an unknown host or slot, for include with
// exclude, and for num_nodes/slots_per_node with include/exclude (as DeepSpeed does).
WorldInfo select_resources(const WorldInfo& hosts, const SelectOptions& options);

// --include without a --hostfile (DeepSpeed's resources are then this host's devices): the
// slots of this host it names, e.g. "localhost:1,3". Throws UsageError for another host, a
// host named without slots, or this host named twice.
WorldInfo include_on_this_host(const std::string& include);

int total_slots(const WorldInfo& world);
// "host slots=N" lines, for mpirun's --hostfile.
std::string to_hostfile(const WorldInfo& world);

// True for names that mean this machine: localhost, 127.x.x.x, ::1, and this host's name.
bool is_local_host(const std::string& host);

}  // namespace zerotrain::launch
