// HF Trainer's checkpoint folders for the Trainer (trainer.cpp): the save at
// global step N goes to `<output_dir>/checkpoint-N/`, which is the engine's save directory
// (`global_stepN/` and `latest`), as HF's Trainer lays it out with DeepSpeed. Here: finding
// the newest complete folder (--resume_from_checkpoint true), checking a given one, and
// --save_total_limit's rotation. No LibTorch.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::trainer::checkpoint_folders {

namespace fs = std::filesystem;

inline fs::path folder(const fs::path& output_dir, int64_t step) {
  return output_dir / ("checkpoint-" + std::to_string(step));
}

// N for a folder named "checkpoint-N" (HF's `^checkpoint-(\d+)$`), else nullopt.
inline std::optional<int64_t> step_of(const std::string& name) {
  constexpr std::string_view kPrefix = "checkpoint-";
  // At most 18 digits: any step fits in an int64_t.
  if (name.size() <= kPrefix.size() || name.size() > kPrefix.size() + 18 || name.compare(0, kPrefix.size(), kPrefix)) {
    return std::nullopt;
  }
  int64_t step = 0;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// Why `dir` is not a complete checkpoint folder, or "" when it is: its `latest` names a tag
// directory that holds a manifest. The engine writes the manifest into the tag and then
// `latest` only after every rank's file is on disk, so a save that stopped leaves neither.
inline std::string incomplete_reason(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fs::exists(dir, ec) ? "is not a directory" : "does not exist";
  std::optional<std::string> tag;
  try {
    tag = checkpoint::read_latest_tag(dir);
  } catch (const Error& e) {
    return e.message();
  }
  if (!tag) {
    if (fs::exists(dir / checkpoint::kManifestName, ec)) {
      return "is a tag directory (it holds " + std::string(checkpoint::kManifestName) +
             "); give the folder above it, " + dir.parent_path().string() + ", which holds `latest`";
    }
    return "has no `latest` file: it is not a checkpoint folder, or its save did not finish";
  }
  if (!fs::exists(dir / *tag / checkpoint::kManifestName, ec)) {
    return "`latest` names " + *tag + ", which has no " + std::string(checkpoint::kManifestName);
  }
  return "";
}

// The checkpoint-N folders of `output_dir`, complete or not, by N.
inline std::vector<std::pair<int64_t, fs::path>> list_folders(const fs::path& output_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    const auto step = step_of(entry.path().filename().string());
    std::error_code dir_ec;
    if (step && entry.is_directory(dir_ec)) out.emplace_back(*step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What --resume_from_checkpoint VALUE names: a checkpoint folder; "true", the complete one
// with the largest step in `output_dir` (HF's get_last_checkpoint, skipping folders whose
// save did not finish); "false" or "", nothing. Throws UsageError or CheckpointError saying
// what to give instead.
inline std::optional<fs::path> resolve_resume(const std::string& value, const std::string& output_dir) {
  if (value.empty() || value == "false" || value == "False") return std::nullopt;
  if (value == "true" || value == "True") {
    ZT_CHECK(!output_dir.empty(), UsageError,
             "--resume_from_checkpoint true resumes from the newest checkpoint-<step> folder of --output_dir: give "
             "--output_dir DIR, or the path of a checkpoint folder");
    std::error_code ec;
    ZT_CHECK(fs::is_directory(output_dir, ec), CheckpointError, "--resume_from_checkpoint true: --output_dir ",
             output_dir, " does not exist, so it has no checkpoint to resume from; drop --resume_from_checkpoint to "
             "start afresh");
    std::string skipped;
    const auto folders = list_folders(output_dir);
    for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
      const std::string why = incomplete_reason(it->second);
      if (why.empty()) return it->second;
      skipped += "\n  " + it->second.filename().string() + " " + why;
    }
    throw CheckpointError("--resume_from_checkpoint true: no complete checkpoint-<step> folder in " + output_dir +
                          (skipped.empty() ? std::string() : "; skipped:" + skipped) +
                          "\nDrop --resume_from_checkpoint to start afresh, or give a checkpoint folder's path");
  }
  std::string trimmed = value;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path path(trimmed);
  const std::string why = incomplete_reason(path);
  if (why.empty()) return path;
  std::string hint = "; give a checkpoint-<step> folder that `zerotrain train --save_steps` wrote";
  std::error_code ec;
  if (!path.parent_path().empty() && fs::is_directory(path.parent_path(), ec)) {
    for (auto& [step, dir] : list_folders(path.parent_path())) {
      if (dir != path && incomplete_reason(dir).empty()) {
        hint = "; the newest complete one beside it is " + dir.string();
      }
    }
  }
  throw CheckpointError("--resume_from_checkpoint " + value + ": " + why + hint);
}

// --save_total_limit (HF's _rotate_checkpoints): once `just_saved` is complete, deletes the
// checkpoint-N folders with the smallest N until `limit` remain (limit 0: keep all). Unlike
// HF, the folder just saved is never the one deleted (after resuming from an earlier step,
// folders of larger steps from the abandoned run go first). A folder loses its `latest` first,
// so one whose deletion stops half-way is incomplete, never taken for a checkpoint. A folder
// that cannot be deleted is logged and kept: training goes on, as in HF.
inline void rotate(const fs::path& output_dir, int64_t limit, const fs::path& just_saved) {
  if (limit <= 0) return;
  auto folders = list_folders(output_dir);
  std::error_code ec;
  auto count = static_cast<int64_t>(folders.size());
  for (const auto& [step, dir] : folders) {
    if (count <= limit) break;
    if (fs::equivalent(dir, just_saved, ec)) continue;
    if (fs::is_symlink(dir, ec)) {
      // Not made by zerotrain: deleting through it would delete elsewhere.
      ZT_LOG_WARN("not deleting ", dir.string(), " for --save_total_limit: it is a symbolic link, not a folder "
                  "zerotrain made; it is kept");
      continue;
    }
    ZT_LOG_INFO("deleting older checkpoint ", dir.string(), " (--save_total_limit ", limit, ")");
    fs::remove(dir / checkpoint::kLatestName, ec);
    if (!ec) fs::remove_all(dir, ec);
    if (ec) {
      ZT_LOG_WARN("could not delete ", dir.string(), " for --save_total_limit: ", ec.message(), "; it is kept");
      continue;
    }
    --count;
  }
}

}  // namespace zerotrain::trainer::checkpoint_folders
