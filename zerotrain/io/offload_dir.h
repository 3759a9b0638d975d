// The folders NVMe offload writes its swap files in: zerotrain's own folders under nvme_path,
// made only after nvme_path passed every check (core/output_path.h), so a refusal leaves
// nothing behind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::io {

// Why `dir` cannot hold offload files because its file system is memory (tmpfs, ramfs):
// "DIR is on tmpfs, which is memory, not a disk: ...", or "" when it is not (or cannot be
// told: opening a file there reports what is wrong).
std::string memory_file_system_problem(const std::string& dir);

// nvme_path/names[0]/names[1]/...: nvme_path must exist (it is never created: a mistyped
// path or an unmounted disk would fill another file system) and be on a disk, not in memory;
// then the folders below it are made as zerotrain's own (a link there is refused). `what`
// names nvme_path in messages ("offload_optimizer.nvme_path"). IoError naming the path and
// the fix otherwise. Returns the innermost folder.
std::string make_offload_dir(const std::string& nvme_path, const std::vector<std::string>& names,
                             std::string_view what);

}  // namespace zerotrain::io
