#include "zerotrain/checkpoint/sharded_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSuffix = ".safetensors";

std::string_view stem_of(std::string_view file_name) { return file_name.substr(0, file_name.size() - kSuffix.size()); }

// huggingface_hub's names: "model-00001-of-00003.safetensors" for "model.safetensors".
std::string shard_name(std::string_view file_name, size_t index, size_t count) {
  if (count == 1) return std::string(file_name);
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, "-%05zu-of-%05zu", index + 1, count);
  return std::string(stem_of(file_name)) + numbers + std::string(kSuffix);
}

bool plain_safetensors_name(std::string_view name) {
  return name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0 &&
         name.find('/') == std::string_view::npos && name.front() != '.';
}

}  // namespace

int64_t OutputTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<size_t> ShardPlan::write_order() const {
  std::vector<size_t> order;
  for (const OutputShard& s : shards) order.insert(order.end(), s.tensors.begin(), s.tensors.end());
  return order;
}

int64_t ShardPlan::total_file_bytes() const {
  int64_t n = static_cast<int64_t>(index.size());
  for (const OutputShard& s : shards) n += s.file_bytes();
  return n;
}

int64_t ShardPlan::largest_file_bytes() const {
  int64_t n = static_cast<int64_t>(index.size());
  for (const OutputShard& s : shards) n = std::max(n, s.file_bytes());
  return n;
}

ShardPlan plan_shards(std::vector<OutputTensor> tensors, int64_t max_shard_bytes, std::string_view file_name,
                      const std::map<std::string, std::string>& metadata) {
  ZT_CHECK(max_shard_bytes >= 1, UsageError, "the largest shard must be at least 1 byte, got ", max_shard_bytes);
  ZT_CHECK(plain_safetensors_name(file_name), UsageError, "\"", file_name,
           "\" cannot name the model's file: give a plain file name ending in .safetensors, such as model.safetensors");
  ShardPlan plan;
  plan.file_name = std::string(file_name);
  std::set<std::string_view> names;
  for (const OutputTensor& t : tensors) {
    ZT_CHECK(!t.name.empty() && t.name != "__metadata__", UsageError, "\"", t.name,
             "\" cannot be a tensor name in a safetensors file");
    ZT_CHECK(names.insert(t.name).second, UsageError, "two tensors are named \"", t.name,
             "\"; a safetensors file holds each name once");
    int64_t nbytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      ZT_CHECK(d >= 0 && !__builtin_mul_overflow(nbytes, d, &nbytes), UsageError, "tensor \"", t.name,
               "\" has a negative or too large shape");
    }
    ZT_CHECK(!__builtin_add_overflow(plan.total_tensor_bytes, nbytes, &plan.total_tensor_bytes), UsageError,
             "the tensors are too large to address together");
  }
  plan.tensors = std::move(tensors);

  // huggingface_hub's split_torch_state_dict_into_shards: fill a shard in order until the
  // next tensor would tip it over; a tensor larger than the limit gets a shard of its own.
  std::vector<OutputShard> shards;
  OutputShard current;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const int64_t nbytes = plan.tensors[i].nbytes();
    if (nbytes > max_shard_bytes) {
      shards.push_back({"", {i}, nbytes, ""});
      continue;
    }
    if (!current.tensors.empty() && current.tensor_bytes + nbytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current = {};
    }
    current.tensors.push_back(i);
    current.tensor_bytes += nbytes;
  }
  if (!current.tensors.empty() || shards.empty()) shards.push_back(std::move(current));

  nlohmann::json weight_map = nlohmann::json::object();   // sorted by name, as HF writes it
  for (size_t s = 0; s < shards.size(); ++s) {
    OutputShard& shard = shards[s];
    shard.file = shard_name(file_name, s, shards.size());
    // Widest dtype first within a file, so every tensor is aligned to its element size.
    std::stable_sort(shard.tensors.begin(), shard.tensors.end(), [&](size_t a, size_t b) {
      return dtype_size(plan.tensors[a].dtype) > dtype_size(plan.tensors[b].dtype);
    });
    std::vector<TensorEntry> entries;
    for (size_t i : shard.tensors) {
      entries.push_back({plan.tensors[i].name, plan.tensors[i].dtype, plan.tensors[i].shape});
      weight_map[plan.tensors[i].name] = shard.file;
    }
    shard.header = encode_safetensors_header(entries, metadata);
  }
  plan.shards = std::move(shards);
  if (plan.sharded()) {
    const nlohmann::json index = {{"metadata", {{"total_size", plan.total_tensor_bytes}}}, {"weight_map", weight_map}};
    plan.index = index.dump(2) + "\n";
  }
  return plan;
}

bool is_output_file(std::string_view name, std::string_view file_name) {
  if (name.size() > 4 && name.substr(name.size() - 4) == ".tmp") name.remove_suffix(4);
  if (name == file_name || name == std::string(file_name) + ".index.json") return true;
  // <stem>-#####-of-#####.safetensors
  const std::string_view stem = stem_of(file_name);
  const std::string_view numbers = "-#####-of-#####";
  if (name.size() != stem.size() + numbers.size() + kSuffix.size() || name.substr(0, stem.size()) != stem ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return false;
  }
  for (size_t i = 0; i < numbers.size(); ++i) {
    const char c = name[stem.size() + i];
    if (numbers[i] == '#' ? !std::isdigit(static_cast<unsigned char>(c)) : c != numbers[i]) return false;
  }
  return true;
}

ShardedWriter::ShardedWriter(fs::path dir, ShardPlan plan, const RoomFor& room)
    : dir_(std::move(dir)), plan_(std::move(plan)) {
  ZT_INTERNAL_ASSERT(!plan_.shards.empty(), "a shard plan without shards");
  std::error_code ec, dir_ec;
  fs::create_directories(dir_, ec);
  ZT_CHECK(!ec && fs::is_directory(dir_, dir_ec), IoError, "cannot create the output directory ", dir_.string(), ": ",
           ec ? ec.message() : "a file of that name is in the way");
  check_room(dir_, plan_.total_file_bytes(), plan_.largest_file_bytes(), room);
  // New shards may take the names of old ones: the old index goes first, so that no index
  // ever names a mix. One new file replaces the old in one rename; its index goes at the end.
  const fs::path old_index = dir_ / plan_.index_name();
  if (plan_.sharded() && fs::exists(old_index, ec)) {
    fs::remove(old_index, ec);
    ZT_CHECK(!ec, IoError, "cannot remove the earlier index ", old_index.string(), ": ", ec.message());
    out_.removed.push_back(old_index);
  }
  file_ = std::make_unique<AtomicFile>(dir_ / plan_.shards[0].file);
  file_->write(plan_.shards[0].header);
  advance();
}

ShardedWriter::~ShardedWriter() {
  if (finished_) return;
  file_.reset();   // its temporary file goes
  for (const fs::path& f : out_.files) {
    std::error_code ec;
    fs::remove(f, ec);
  }
}

std::optional<size_t> ShardedWriter::next_tensor() const {
  if (shard_ >= plan_.shards.size()) return std::nullopt;
  return plan_.shards[shard_].tensors[slot_];
}

void ShardedWriter::advance() {
  for (;;) {
    const OutputShard& s = plan_.shards[shard_];
    for (; slot_ < s.tensors.size(); ++slot_) {
      left_ = plan_.tensors[s.tensors[slot_]].nbytes();
      if (left_ > 0) return;
    }
    file_->commit();
    out_.bytes_written += file_->bytes_written();
    out_.files.push_back(file_->path());
    file_.reset();
    slot_ = 0;
    if (++shard_ == plan_.shards.size()) return;
    file_ = std::make_unique<AtomicFile>(dir_ / plan_.shards[shard_].file);
    file_->write(plan_.shards[shard_].header);
  }
}

void ShardedWriter::write(const void* data, int64_t nbytes) {
  if (nbytes == 0) return;
  ZT_CHECK(shard_ < plan_.shards.size(), InternalError, "ShardedWriter: ", nbytes,
           " bytes after every planned tensor was written");
  const OutputTensor& t = plan_.tensors[plan_.shards[shard_].tensors[slot_]];
  ZT_CHECK(nbytes > 0 && nbytes <= left_, InternalError, "ShardedWriter: ", nbytes, " bytes for tensor \"", t.name,
           "\", which has ", left_, " bytes left to write");
  file_->write(data, nbytes);
  left_ -= nbytes;
  if (left_ == 0) {
    ++slot_;
    advance();
  }
}

ShardedOutput ShardedWriter::finish() {
  ZT_CHECK(shard_ == plan_.shards.size(), InternalError, "ShardedWriter: finished before the bytes of tensor \"",
           plan_.tensors[*next_tensor()].name, "\"");
  if (plan_.sharded()) {
    AtomicFile index(dir_ / plan_.index_name());
    index.write(plan_.index);
    index.commit();
    out_.bytes_written += index.bytes_written();
    out_.files.push_back(index.path());
  }
  finished_ = true;

  std::set<std::string> written;
  for (const fs::path& f : out_.files) written.insert(f.filename().string());
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && is_output_file(name, plan_.file_name) && !written.count(name)) {
      stale.push_back(it->path());
    }
  }
  for (const fs::path& f : stale) {
    fs::remove(f, ec);
    ZT_CHECK(!ec, IoError, "cannot remove ", f.string(), ", left by an earlier save: ", ec.message());
    out_.removed.push_back(f);
  }
  return std::move(out_);
}

}  // namespace zerotrain::checkpoint
