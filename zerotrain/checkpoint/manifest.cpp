#include "zerotrain/checkpoint/manifest.h"

#include <algorithm>
#include <set>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/json_reader.h"

namespace zerotrain::checkpoint {
namespace {

constexpr size_t kMaxDepth = 64;
constexpr int kMaxWorldSize = 1 << 20;

// Reads typed fields of one JSON object, naming the object in errors.
class Fields {
 public:
  Fields(const Json& json, std::string where, std::string_view file)
      : json_(json), where_(std::move(where)), file_(file) {
    if (!json_.is_object()) fail("is not an object");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(std::string(file_) + ": " + where_ + " " + what + " (a damaged or foreign manifest)");
  }
  const Json& at(const char* key) const {
    auto it = json_.find(key);
    if (it == json_.end()) fail(std::string("has no \"") + key + "\"");
    return *it;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const Json& v = at(key);
    if (!v.is_number_integer()) fail(std::string("\"") + key + "\" is not an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(std::string("\"") + key + "\" is out of range");
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail(std::string("\"") + key + "\" = " + std::to_string(x) + " is out of range");
    return x;
  }
  double number(const char* key) const {
    const Json& v = at(key);
    if (!v.is_number()) fail(std::string("\"") + key + "\" is not a number");
    return v.get<double>();
  }
  bool boolean(const char* key) const {
    const Json& v = at(key);
    if (!v.is_boolean()) fail(std::string("\"") + key + "\" is not true or false");
    return v.get<bool>();
  }
  std::string string(const char* key) const {
    const Json& v = at(key);
    if (!v.is_string()) fail(std::string("\"") + key + "\" is not a string");
    return v.get<std::string>();
  }
  const Json& array(const char* key) const {
    const Json& v = at(key);
    if (!v.is_array()) fail(std::string("\"") + key + "\" is not an array");
    return v;
  }
  const Json& object_or_null(const char* key) const {
    const Json& v = at(key);
    if (!v.is_object() && !v.is_null()) fail(std::string("\"") + key + "\" is not an object or null");
    return v;
  }
  uint64_t hex(const char* key) const {
    uint64_t x = 0;
    if (!from_hex(string(key), x)) fail(std::string("\"") + key + "\" is not 16 hex digits");
    return x;
  }

 private:
  const Json& json_;
  std::string where_;
  std::string_view file_;
};

std::vector<int64_t> read_shape(const Fields& f, std::string_view file, const std::string& where) {
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (const Json& d : f.array("shape")) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 ||
        (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      f.fail("has a shape dimension that is not a non-negative integer");
    }
    shape.push_back(d.get<int64_t>());
    if (__builtin_mul_overflow(numel, shape.back(), &numel) || numel > (int64_t{1} << 60)) {
      f.fail("has a shape too large to address");
    }
  }
  if (shape.size() > 16) f.fail("has more than 16 dimensions");
  (void)file;
  (void)where;
  return shape;
}

bool plain_file_name(const std::string& name) {
  return !name.empty() && name.size() < 256 && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Json whole_to_json(const WholeTensor& t) { return {{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}}; }

std::vector<WholeTensor> read_wholes(const Fields& top, const char* key, std::string_view file) {
  std::vector<WholeTensor> out;
  std::set<std::string> names;
  for (const Json& j : top.array(key)) {
    Fields f(j, std::string(key) + " entry", file);
    WholeTensor t{f.string("name"), read_shape(f, file, key), f.string("dtype")};
    if (!dtype_from_tag(t.dtype)) f.fail("\"" + t.name + "\" has an unknown dtype \"" + t.dtype + "\"");
    if (!names.insert(t.name).second) f.fail("\"" + t.name + "\" appears twice");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

int64_t ParamRecord::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const ParamRecord* Manifest::find_param(std::string_view name) const {
  for (const auto& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string fragment_key(std::string_view state, std::string_view param, const Fragment& fragment) {
  return std::string(state) + "/" + std::string(param) + "[" + std::to_string(fragment.begin) + ":" +
         std::to_string(fragment.end) + "]";
}

std::string rank_file_name(int rank) {
  std::string digits = std::to_string(rank);
  if (digits.size() < 5) digits.insert(0, 5 - digits.size(), '0');
  return "rank_" + digits + ".safetensors";
}

Json manifest_to_json(const Manifest& m) {
  Json j;
  j["format"] = kFormatName;
  j["format_version"] = m.format_version;
  j["tag"] = m.tag;
  j["zerotrain_version"] = m.zerotrain_version;
  j["world_size"] = m.world_size;
  j["zero_stage"] = m.zero_stage;
  j["model_dtype"] = m.model_dtype;
  j["counters"] = {{"global_steps", m.counters.global_steps},
                   {"global_samples", m.counters.global_samples},
                   {"skipped_steps", m.counters.skipped_steps},
                   {"micro_steps", m.counters.micro_steps}};
  j["optimizer"] = m.optimizer;
  j["optimizer_states"] = m.optimizer_states;
  j["lr_scheduler"] = m.lr_scheduler;
  j["loss_scaler"] = m.loss_scaler;
  j["rng_saved"] = m.rng_saved;
  j["groups"] = Json::array();
  for (const auto& g : m.groups) {
    j["groups"].push_back(
        {{"name", g.name}, {"lr", g.lr}, {"weight_decay", g.weight_decay}, {"optimizer_steps", g.optimizer_steps}});
  }
  j["params"] = Json::array();
  for (const auto& p : m.params) {
    Json frags = Json::array();
    for (const auto& f : p.fragments) frags.push_back({f.rank, f.begin, f.end});
    j["params"].push_back({{"name", p.name}, {"shape", p.shape}, {"dtype", p.dtype}, {"group", p.group},
                           {"fragments", std::move(frags)}});
  }
  j["buffers"] = Json::array();
  for (const auto& t : m.buffers) j["buffers"].push_back(whole_to_json(t));
  j["frozen"] = Json::array();
  for (const auto& t : m.frozen) j["frozen"].push_back(whole_to_json(t));
  if (!m.rank_tensors.empty()) {
    j["rank_tensors"] = Json::array();
    for (const auto& t : m.rank_tensors) j["rank_tensors"].push_back({{"name", t.name}, {"dtype", t.dtype}});
  }
  j["files"] = Json::array();
  for (const auto& f : m.files) {
    j["files"].push_back({{"rank", f.rank}, {"name", f.name}, {"bytes", f.bytes}, {"xxh3_64", to_hex(f.checksum)},
                          {"header_xxh3_64", to_hex(f.header_checksum)}});
  }
  j["ds_config"] = m.ds_config;
  j["client_state"] = m.client_state;
  return j;
}

Manifest manifest_from_json(std::string_view text, std::string_view file) {
  // The one JSON reader (core/json_reader.h): duplicate keys, nesting and size are refused
  // as in every other JSON file zerotrain reads, so no key is read one way here and another
  // way by a tool that keeps the first of two.
  json::ReadResult read = json::read_json_text(
      text, {.max_bytes = kMaxManifestBytes, .max_depth = kMaxDepth, .what = "a checkpoint manifest"});
  if (!read.ok()) throw CheckpointError(std::string(file) + ": " + read.problem + " (the manifest is damaged)");
  Json j = std::move(read.value);
  Fields top(j, "the manifest", file);
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kFormatName) {
    top.fail("does not say \"format\": \"" + std::string(kFormatName) + "\"; it is not a zerotrain checkpoint");
  }
  Manifest m;
  m.format_version = static_cast<int>(top.integer("format_version", 0, INT32_MAX));
  if (m.format_version != kFormatVersion) {
    throw CheckpointError(std::string(file) + ": checkpoint format version " + std::to_string(m.format_version) +
                          "; this zerotrain reads version " + std::to_string(kFormatVersion) +
                          (m.format_version > kFormatVersion ? " (written by a newer zerotrain: upgrade to load it)" : ""));
  }
  m.tag = top.string("tag");
  m.zerotrain_version = top.string("zerotrain_version");
  m.world_size = static_cast<int>(top.integer("world_size", 1, kMaxWorldSize));
  m.zero_stage = static_cast<int>(top.integer("zero_stage", 0, 3));
  m.model_dtype = top.string("model_dtype");
  if (m.model_dtype != "fp32" && m.model_dtype != "bf16" && m.model_dtype != "fp16") top.fail("has an unknown model_dtype");
  {
    Fields c(top.at("counters"), "counters", file);
    m.counters = {c.integer("global_steps", 0, INT64_MAX), c.integer("global_samples", 0, INT64_MAX),
                  c.integer("skipped_steps", 0, INT64_MAX), c.integer("micro_steps", 0, INT64_MAX)};
  }
  m.optimizer = top.object_or_null("optimizer");
  for (const Json& s : top.array("optimizer_states")) {
    if (!s.is_string() || s.get<std::string>().empty() || s.get<std::string>().find('/') != std::string::npos) {
      top.fail("has an optimizer state name that is not a plain name");
    }
    m.optimizer_states.push_back(s.get<std::string>());
  }
  m.lr_scheduler = top.object_or_null("lr_scheduler");
  m.loss_scaler = top.object_or_null("loss_scaler");
  m.rng_saved = top.boolean("rng_saved");
  for (const Json& g : top.array("groups")) {
    Fields f(g, "a group", file);
    m.groups.push_back({f.string("name"), f.number("lr"), f.number("weight_decay"),
                        f.integer("optimizer_steps", 0, INT64_MAX)});
  }
  std::set<std::string> names;
  for (const Json& p : top.array("params")) {
    Fields f(p, "a parameter", file);
    ParamRecord r;
    r.name = f.string("name");
    Fields named(p, "parameter \"" + r.name + "\"", file);
    if (!names.insert(r.name).second) named.fail("appears twice");
    r.shape = read_shape(named, file, r.name);
    r.dtype = named.string("dtype");
    r.group = static_cast<int>(named.integer("group", 0, static_cast<int64_t>(m.groups.size()) - 1));
    int64_t covered = 0;
    for (const Json& fr : named.array("fragments")) {
      if (!fr.is_array() || fr.size() != 3 || !fr[0].is_number_integer() || !fr[1].is_number_integer() ||
          !fr[2].is_number_integer()) {
        named.fail("has a fragment that is not [rank, begin, end]");
      }
      const int64_t rank = fr[0].get<int64_t>(), begin = fr[1].get<int64_t>(), end = fr[2].get<int64_t>();
      if (rank < 0 || rank >= m.world_size) named.fail("has a fragment on rank " + std::to_string(rank) + " of " + std::to_string(m.world_size));
      if (begin != covered || end <= begin) named.fail("has fragments that do not tile it in order (gap or overlap at element " + std::to_string(covered) + ")");
      covered = end;
      r.fragments.push_back({static_cast<int>(rank), begin, end});
    }
    if (covered != r.numel()) named.fail("has fragments covering " + std::to_string(covered) + " of its " + std::to_string(r.numel()) + " elements");
    m.params.push_back(std::move(r));
  }
  m.buffers = read_wholes(top, "buffers", file);
  m.frozen = read_wholes(top, "frozen", file);
  if (j.contains("rank_tensors")) {
    std::set<std::string> rank_names{"rng/cpu"};
    for (const Json& tj : top.array("rank_tensors")) {
      Fields f(tj, "a rank_tensors entry", file);
      RankTensor t{f.string("name"), f.string("dtype")};
      if (!dtype_from_tag(t.dtype)) f.fail("\"" + t.name + "\" has an unknown dtype \"" + t.dtype + "\"");
      if (t.name.empty() || t.name.find('[') != std::string::npos || t.name.rfind("buffer/", 0) == 0 ||
          t.name.rfind("frozen/", 0) == 0 || !rank_names.insert(t.name).second) {
        f.fail("\"" + t.name + "\" is empty, repeated, or a name the checkpoint's own tensors use");
      }
      m.rank_tensors.push_back(std::move(t));
    }
  }
  for (const Json& fj : top.array("files")) {
    Fields f(fj, "a file entry", file);
    FileRecord r{static_cast<int>(f.integer("rank", 0, m.world_size - 1)), f.string("name"),
                 f.integer("bytes", 8, INT64_MAX), f.hex("xxh3_64"), f.hex("header_xxh3_64")};
    if (!plain_file_name(r.name)) f.fail("names \"" + r.name + "\", which is not a plain file name");
    if (r.rank != static_cast<int>(m.files.size())) f.fail("is out of rank order");
    m.files.push_back(std::move(r));
  }
  if (static_cast<int>(m.files.size()) != m.world_size) {
    top.fail("lists " + std::to_string(m.files.size()) + " rank files for a world of " + std::to_string(m.world_size));
  }
  m.ds_config = top.at("ds_config");
  m.client_state = top.at("client_state");
  return m;
}

}  // namespace zerotrain::checkpoint
