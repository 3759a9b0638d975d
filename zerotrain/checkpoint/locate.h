// Finding a tag in a checkpoint directory the way the `zerotrain zero-to-fp32` and
// `zerotrain checkpoint inspect` commands take it (DeepSpeed's zero_to_fp32.py: the save
// directory with its `latest`, and an optional tag), and what else the directory holds.
// No LibTorch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace zerotrain::checkpoint {

// What a save directory holds besides the tag in use.
// The rank that creates, renames and deletes entries of a save directory: rank 0, or with
// checkpoint.use_node_local_storage the first rank of every node (LOCAL_RANK 0), since each
// node then keeps its own copy of the tag.
bool leads_save_directory(bool use_node_local_storage, int rank);

struct DirectoryListing {
  std::vector<std::string> tags;       // subdirectories with a manifest, sorted
  std::vector<std::string> unfinished; // ".<tag>.partial" staging and ".<tag>.old" directories a
                                       // save left behind when it stopped (safe to delete)
};
DirectoryListing list_directory(const std::filesystem::path& dir);

struct LocatedTag {
  std::filesystem::path save_dir;   // where `latest` and the other tags are
  std::filesystem::path tag_dir;
  std::string tag;
  bool from_latest = false;         // the tag came from `<save_dir>/latest`
};

// `<dir>/<tag>`, or with `tag` empty the tag `<dir>/latest` names; `dir` may also be a tag
// directory itself (it holds a manifest). Throws CheckpointError naming the path and what
// to do: a missing directory, no `latest` (pass a tag; the tags present are listed), a tag
// that is not there.
LocatedTag locate_tag(const std::filesystem::path& dir, const std::string& tag);

}  // namespace zerotrain::checkpoint
