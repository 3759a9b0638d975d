#include "zerotrain/io/offload_dir.h"

#include <linux/magic.h>
#include <sys/statfs.h>

#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"

namespace zerotrain::io {

// tmpfs and ramfs are memory: offloading to them saves nothing, and older kernels refuse
// O_DIRECT there while newer ones accept it. Refused on every kernel, so a run behaves the
// same everywhere.
std::string memory_file_system_problem(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return "";
  if (fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC) return "";
  return dir +
         " is on tmpfs, which is memory, not a disk: put nvme_path on a disk, or offload to device \"cpu\" instead";
}

std::string make_offload_dir(const std::string& nvme_path, const std::vector<std::string>& names,
                             std::string_view what) {
  files::check_existing_root(nvme_path, what);
  const std::string memory = memory_file_system_problem(nvme_path);
  ZT_CHECK(memory.empty(), IoError, what, ": ", memory);
  return files::make_own_directories(nvme_path, names, what).string();
}

}  // namespace zerotrain::io
