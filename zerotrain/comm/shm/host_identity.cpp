#include "zerotrain/comm/shm/host_identity.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::shm {
namespace {

std::string namespace_inode(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? std::to_string(st.st_ino) : std::string("?");
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? std::string("?") : id;
}

}  // namespace

std::string host_identity(int rank) {
  if (auto forced = env::get("ZEROTRAIN_HOST_ID")) {
    if (forced->find(',') == std::string::npos) return "named:" + *forced;
    std::vector<std::string> names;
    std::stringstream list(*forced);
    for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    ZT_CHECK(rank < static_cast<int>(names.size()), ConfigError, "ZEROTRAIN_HOST_ID=", *forced, " names ",
             names.size(), " hosts, one per rank, but this is rank ", rank, "; give one name per rank or one for all");
    return "named:" + names[rank];
  }
  return detail::str(boot_id(), "/net:", namespace_inode("/proc/self/ns/net"), "/pid:",
                     namespace_inode("/proc/self/ns/pid"));
}

}  // namespace zerotrain::comm::shm
