#include "zerotrain/core/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

#include "zerotrain/core/env.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::memory {
namespace {

std::optional<int64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;   // v2 writes "max" for no limit
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// This process's cgroup path for the given hierarchy ("" for v2, "memory" for v1).
std::optional<std::string> cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (controllers == controller || ("," + controllers + ",").find("," + controller + ",") != std::string::npos) {
      return line.substr(second + 1);
    }
  }
  return std::nullopt;
}

// Room left below the cgroup's limit: its own directory when visible, else the mount's root
// (inside a container the process's cgroup is usually the root of the namespace).
std::optional<int64_t> cgroup_room(const std::string& limit_file, const std::string& usage_file,
                                   const std::string& mount, const std::optional<std::string>& path) {
  for (const std::string& dir : {path ? mount + *path : mount, mount}) {
    const auto limit = read_number(dir + "/" + limit_file);
    const auto usage = read_number(dir + "/" + usage_file);
    // v1 reports "no limit" as a huge number near 2^63.
    if (limit && usage && *limit < (int64_t{1} << 60)) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Available> available() {
  if (auto given = env::get("ZEROTRAIN_MEMORY_AVAILABLE")) {
    return Available{strings::parse_bytes(*given, "ZEROTRAIN_MEMORY_AVAILABLE"), "ZEROTRAIN_MEMORY_AVAILABLE"};
  }
  std::optional<Available> best;
  auto consider = [&](std::optional<int64_t> bytes, const char* source) {
    if (bytes && (!best || *bytes < best->bytes)) best = Available{*bytes, source};
  };
  consider(mem_available(), "MemAvailable (/proc/meminfo)");
  consider(cgroup_room("memory.max", "memory.current", "/sys/fs/cgroup", cgroup_path("")),
           "the cgroup's memory.max less memory.current");
  consider(cgroup_room("memory.limit_in_bytes", "memory.usage_in_bytes", "/sys/fs/cgroup/memory",
                       cgroup_path("memory")),
           "the cgroup's memory.limit_in_bytes less memory.usage_in_bytes");
  return best;
}

}  // namespace zerotrain::memory
