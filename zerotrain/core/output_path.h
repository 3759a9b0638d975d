// Where the project's outputs may go: one policy for every file and folder it writes (the
// metrics file, the monitors' files, checkpoints and `latest`, model folders, offload swap
// files, the io-bench file). Whatever a path turns out to be, a write never blocks, never
// goes through a link, never lands on one of the run's inputs, and a refusal leaves nothing
// behind:
// - a FIFO, a device, a socket or a directory where a file goes is refused without being
//   opened (opening a FIFO for writing waits for a reader; a device may act on open);
// - a symbolic link where the project writes a file or makes a folder of its own is refused:
//   links are followed only in the roots the user names (--output_dir, nvme_path, ...);
// - a file that is one of the run's inputs (its config, its data) is refused;
// - an existing non-empty file that a writer would truncate is refused unless the user
//   allows it (--overwrite_output_dir); appending and atomic replacement lose nothing;
// - a root the user names for bulk data (nvme_path) must exist: it is never created, so a
//   typo or an unmounted disk cannot fill another file system;
// - folders are made only after every check has passed, and removed again on a refusal.
// A path that cannot be written is an IoError naming it and the fix; an existing file that
// may not be replaced is a UsageError naming the flag that allows it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::files {

// Records `path` as an input of this process's runs, named `what` ("config file", "dataset
// file"): no output may be written over it, under any name (hard links too). A folder (a
// dataset's) records the files directly in it.
void register_input(const std::filesystem::path& path, std::string_view what);
// Forgets every input (tests).
void clear_inputs();

struct OutputCheck {
  std::string_view what = "output file";   // names the file in messages: "--metrics_file"
  // An existing non-empty file may be truncated; false refuses it with `replace_hint`.
  bool may_replace = true;
  std::string_view replace_hint = "choose another path";
};

// Checks `path` before the project writes it (creates, truncates, appends to or renames over
// it), by lstat: refuses a link, a non-regular file and an input (IoError), and an existing
// non-empty file when !may_replace (UsageError). Returns whether a file is there.
bool check_output_file(const std::filesystem::path& path, const OutputCheck& check = {});

enum class OpenMode { kTruncate, kAppend, kCreateNew };
// Opens `path` for writing after check_output_file, with O_NOFOLLOW and without blocking, and
// checks again what was opened (the path may change between the two). kCreateNew refuses an
// existing file. Returns the descriptor (O_CLOEXEC, blocking); IoError naming the path.
int open_output_file(const std::filesystem::path& path, OpenMode mode, const OutputCheck& check = {});

// `path` is where the project makes a folder of its own: nothing there, or a real folder.
// A link or a file there is refused (IoError naming `what` and the path).
void check_own_directory(const std::filesystem::path& path, std::string_view what);

// Makes root/names[0]/names[1]/... as the project's own folders (check_own_directory on each;
// folders made at the same time by another process are accepted). `root` must exist. On a
// refusal, the folders this call made are removed. Returns the innermost folder.
std::filesystem::path make_own_directories(const std::filesystem::path& root, const std::vector<std::string>& names,
                                           std::string_view what);

// A root the user names for bulk data (nvme_path, io-bench --path) must exist and be a
// folder; it is never created. IoError naming `what`, the path and the fix otherwise.
void check_existing_root(const std::filesystem::path& root, std::string_view what);

}  // namespace zerotrain::files
