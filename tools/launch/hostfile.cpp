#include "tools/launch/hostfile.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "zerotrain/core/error.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain::launch {
namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    parts.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

int parse_slot(const std::string& text, const std::string& spec, const char* flag) {
  try {
    if (text.size() > 6) throw std::out_of_range(text);
    size_t used = 0;
    const int slot = std::stoi(text, &used);
    if (used == text.size() && slot >= 0) return slot;
  } catch (const std::exception&) {
  }
  throw UsageError(detail::str(flag, " '", spec, "': slot '", text, "' is not a non-negative integer"));
}

// host -> requested slots (empty set: the whole host), in the order given.
std::vector<std::pair<std::string, std::set<int>>> parse_filter(const std::string& filter, const char* flag) {
  std::vector<std::pair<std::string, std::set<int>>> specs;
  for (const std::string& raw : split(filter, '@')) {
    const std::string spec = trim(raw);
    ZT_CHECK(!spec.empty(), UsageError, flag, " '", filter, "': empty node spec; the syntax is "
             "NAME[:SLOT[,SLOT...]][@NAME...], e.g. worker-0:0,1@worker-1");
    const size_t colon = spec.find(':');
    std::set<int> slots;
    if (colon != std::string::npos) {
      for (const std::string& slot : split(spec.substr(colon + 1), ',')) slots.insert(parse_slot(trim(slot), spec, flag));
    }
    specs.emplace_back(spec.substr(0, colon), std::move(slots));
  }
  return specs;
}

const HostSlots& find_host(const WorldInfo& hosts, const std::string& name, const char* flag) {
  for (const auto& h : hosts) {
    if (h.host == name) return h;
  }
  std::string known;
  for (const auto& h : hosts) known += (known.empty() ? "" : ", ") + h.host;
  throw UsageError(detail::str(flag, ": host '", name, "' is not in the hostfile (hosts: ", known, ")"));
}

void check_slots(const HostSlots& host, const std::set<int>& slots, const char* flag) {
  for (int slot : slots) {
    ZT_CHECK(std::find(host.slots.begin(), host.slots.end(), slot) != host.slots.end(), UsageError, flag,
             ": host '", host.host, "' has no slot ", slot, " (it has slots 0..", host.slots.size() - 1, ")");
  }
}

}  // namespace

WorldInfo parse_hostfile(std::string_view text, std::string_view origin) {
  static const std::regex kEntry(R"(^(\S+)\s+slots=(\d+)\s*$)");
  WorldInfo hosts;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string entry = trim(line);
    if (entry.empty() || entry[0] == '#') continue;
    std::smatch m;
    ZT_CHECK(std::regex_match(entry, m, kEntry), UsageError, origin, ":", number, ": bad hostfile entry '", entry,
             "'; each line is 'HOSTNAME slots=N'");
    const std::string host = m[1];
    ZT_CHECK(std::none_of(hosts.begin(), hosts.end(), [&](const HostSlots& h) { return h.host == host; }), UsageError,
             origin, ":", number, ": host '", host, "' appears twice; give each host one line");
    const std::string slots = m[2];
    ZT_CHECK(slots.size() <= 6, UsageError, origin, ":", number, ": host '", host, "' has slots=", slots,
             "; give the number of ranks to run there");
    const int count = std::stoi(slots);
    ZT_CHECK(count > 0, UsageError, origin, ":", number, ": host '", host, "' has slots=0");
    HostSlots h{host, {}};
    for (int s = 0; s < count; ++s) h.slots.push_back(s);
    hosts.push_back(std::move(h));
  }
  ZT_CHECK(!hosts.empty(), UsageError, origin, ": the hostfile has no entries; each line is 'HOSTNAME slots=N'");
  return hosts;
}

WorldInfo read_hostfile(const std::filesystem::path& path) {
  auto file = files::read_text_file(path, {.what = "hostfile"});
  ZT_CHECK(file.text, UsageError, "cannot read the hostfile ", path.string(), ": ", file.problem,
           "; give an existing file to --hostfile");
  return parse_hostfile(*file.text, path.string());
}

WorldInfo select_resources(const WorldInfo& hosts, const SelectOptions& options) {
  const bool filtered = !options.include.empty() || !options.exclude.empty();
  ZT_CHECK(options.include.empty() || options.exclude.empty(), UsageError,
           "--include and --exclude cannot be used together; use one of them");
  ZT_CHECK(!filtered || (options.num_nodes < 0 && options.slots_per_node < 0), UsageError,
           "--nnodes/--num_nodes and --nproc_per_node/--num_gpus cannot be used with --include/--exclude; "
           "the filter already says which hosts and slots to use");
  WorldInfo world;
  if (!options.include.empty()) {
    std::map<std::string, std::set<int>> wanted;
    for (const auto& [name, slots] : parse_filter(options.include, "--include")) {
      const HostSlots& host = find_host(hosts, name, "--include");
      check_slots(host, slots, "--include");
      auto& w = wanted[name];
      if (slots.empty()) {
        w.insert(host.slots.begin(), host.slots.end());
      } else {
        w.insert(slots.begin(), slots.end());
      }
    }
    for (const auto& h : hosts) {
      if (auto it = wanted.find(h.host); it != wanted.end()) world.push_back({h.host, {it->second.begin(), it->second.end()}});
    }
    return world;
  }
  world = hosts;
  if (!options.exclude.empty()) {
    for (const auto& [name, slots] : parse_filter(options.exclude, "--exclude")) {
      const HostSlots& host = find_host(hosts, name, "--exclude");
      check_slots(host, slots, "--exclude");
      for (auto& w : world) {
        if (w.host != name) continue;
        if (slots.empty()) {
          w.slots.clear();
        } else {
          std::erase_if(w.slots, [&](int s) { return slots.count(s) > 0; });
        }
      }
    }
    std::erase_if(world, [](const HostSlots& h) { return h.slots.empty(); });
    ZT_CHECK(!world.empty(), UsageError, "--exclude '", options.exclude, "' leaves no host to run on");
    return world;
  }
  if (options.num_nodes >= 0) {
    ZT_CHECK(options.num_nodes >= 1 && options.num_nodes <= static_cast<int>(world.size()), UsageError,
             "--nnodes ", options.num_nodes, ": the hostfile has ", world.size(), " hosts");
    world.resize(options.num_nodes);
  }
  if (options.slots_per_node >= 0) {
    for (auto& h : world) {
      ZT_CHECK(options.slots_per_node >= 1 && options.slots_per_node <= static_cast<int>(h.slots.size()), UsageError,
               "--nproc_per_node ", options.slots_per_node, ": host '", h.host, "' has ", h.slots.size(), " slots");
      h.slots.resize(options.slots_per_node);
    }
  }
  return world;
}

WorldInfo include_on_this_host(const std::string& include) {
  const auto specs = parse_filter(include, "--include");
  ZT_CHECK(specs.size() == 1, UsageError, "--include '", include, "' names ", specs.size(),
           " hosts without a --hostfile; list them in a hostfile ('HOSTNAME slots=N' per line) and give --hostfile");
  const auto& [name, slots] = specs.front();
  ZT_CHECK(is_local_host(name), UsageError, "--include '", include, "': host '", name, "' is not this host, and "
           "there is no --hostfile; list the hosts in one ('HOSTNAME slots=N' per line) and give --hostfile");
  ZT_CHECK(!slots.empty(), UsageError, "--include '", include, "': without a --hostfile, name the slots to use, "
           "e.g. --include ", name, ":0,1 (or give --nproc_per_node N for slots 0..N-1)");
  return {{name, {slots.begin(), slots.end()}}};
}

int total_slots(const WorldInfo& world) {
  int total = 0;
  for (const auto& h : world) total += static_cast<int>(h.slots.size());
  return total;
}

std::string to_hostfile(const WorldInfo& world) {
  std::string text;
  for (const auto& h : world) text += detail::str(h.host, " slots=", h.slots.size(), "\n");
  return text;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 && host == name;
}

}  // namespace zerotrain::launch
