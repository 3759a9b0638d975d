#include "zerotrain/checkpoint/locate.h"

#include <algorithm>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string tags_present(const fs::path& dir) {
  const DirectoryListing listing = list_directory(dir);
  if (listing.tags.empty()) return "no tags with a manifest are in " + dir.string();
  std::string out = "tags in " + dir.string() + ": ";
  for (size_t i = 0; i < listing.tags.size() && i < 10; ++i) out += (i ? ", " : "") + listing.tags[i];
  if (listing.tags.size() > 10) out += ", ... (" + std::to_string(listing.tags.size()) + " in all)";
  return out;
}

}  // namespace

bool leads_save_directory(bool use_node_local_storage, int rank) {
  if (!use_node_local_storage) return rank == 0;
  const auto local = env::get_int("LOCAL_RANK");
  return local ? *local == 0 : rank == 0;
}

DirectoryListing list_directory(const fs::path& dir) {
  DirectoryListing listing;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string name = it->path().filename().string();
    if (name.front() == '.') {
      // The staging names save_checkpoint uses (checkpoint/protocol/save.cpp).
      if (ends_with(name, ".partial") || ends_with(name, ".old")) listing.unfinished.push_back(name);
    } else if (fs::is_regular_file(it->path() / kManifestName, type_ec)) {
      listing.tags.push_back(name);
    }
  }
  std::sort(listing.tags.begin(), listing.tags.end());
  std::sort(listing.unfinished.begin(), listing.unfinished.end());
  return listing;
}

LocatedTag locate_tag(const fs::path& dir, const std::string& tag) {
  std::error_code ec;
  ZT_CHECK(fs::is_directory(dir, ec), CheckpointError, dir.string(),
           fs::exists(dir, ec) ? ": not a directory (give the directory a checkpoint was saved into)"
                               : ": no such checkpoint directory");
  LocatedTag located;
  if (!tag.empty()) {
    ZT_CHECK(valid_tag(tag), CheckpointError, "--tag \"", tag,
             "\" cannot name a tag directory (printable characters without '/', not starting with '.')");
    located = {dir, dir / tag, tag, false};
  } else if (auto latest = read_latest_tag(dir)) {
    located = {dir, dir / *latest, *latest, true};
  } else if (fs::is_regular_file(dir / kManifestName, ec)) {
    // A tag directory given directly: its parent is the save directory.
    const fs::path absolute = fs::absolute(dir).lexically_normal();
    const fs::path tag_dir = absolute.filename().empty() ? absolute.parent_path() : absolute;
    return {tag_dir.parent_path(), dir, tag_dir.filename().string(), false};
  } else {
    throw CheckpointError((dir / kLatestName).string() + ": missing, so the tag to use is unknown; pass --tag (" +
                          tags_present(dir) + ")");
  }
  if (!fs::is_directory(located.tag_dir, ec)) {
    throw CheckpointError(located.tag_dir.string() + ": no such tag" +
                          (located.from_latest ? " (named by " + (dir / kLatestName).string() + ")" : std::string()) +
                          "; " + tags_present(dir));
  }
  return located;
}

}  // namespace zerotrain::checkpoint
