// A rank file whose header was forged and its checksums then sealed again (the manifest's
// size, whole-file and header checksums recomputed): no checksum catches it, so what does is
// the header's own validation against the format and the manifest (check_rank_header). It
// must run identically where a loader opens the file and where `checkpoint inspect` asks
// whether the tag is intact (CheckpointReader::verify_files).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "tests/support/synthetic_checkpoint.h"
#include "zerotrain/checkpoint/consolidate.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Forged {
  fs::path tag_dir;
  fs::path rank_file;
};

// A fresh two-rank checkpoint whose rank 0 header text is replaced by what `forge` makes of
// it, the data section kept, and the manifest's bytes and checksums of that file sealed again.
Forged forge_rank0(const std::string& name, const std::function<std::string(Json&)>& forge) {
  const fs::path root = fs::temp_directory_path() / ("zt_rank_header_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  test::SyntheticSpec spec;
  spec.params = {{"emb.weight", {5, 3}}, {"fc.bias", {4}}};
  spec.buffers = {{"steps", {}, Dtype::kI64}};
  Manifest m = test::write_synthetic_checkpoint(root, spec);
  const fs::path tag_dir = root / spec.tag;
  const fs::path file = tag_dir / rank_file_name(0);

  const std::string bytes = read_all(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  Json header = Json::parse(bytes.substr(8, n));
  std::string text = forge(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text;
  const size_t header_bytes = out.size();
  out += bytes.substr(8 + n);
  write_all(file, out);

  m.files[0].bytes = static_cast<int64_t>(out.size());
  m.files[0].checksum = checksum_of(out.data(), static_cast<int64_t>(out.size()));
  m.files[0].header_checksum = checksum_of(out.data(), static_cast<int64_t>(header_bytes));
  write_all(tag_dir / kManifestName, manifest_to_json(m).dump(1));
  return {tag_dir, file};
}

std::string first_fragment(const Json& header, const std::string& state) {
  for (const auto& [key, value] : header.items()) {
    if (key.rfind(state + "/", 0) == 0) return key;
  }
  return "";
}

// What verify_files (inspect's verdict) and a loader (consolidation, which opens every rank
// file and reads every tensor) say: both must refuse, with the same first problem.
void expect_refused_by_both(const Forged& f, const std::string& needle) {
  std::vector<std::string> problems;
  {
    CheckpointReader reader(f.tag_dir);
    problems = reader.verify_files();
  }
  ASSERT_FALSE(problems.empty()) << "inspect would call this tag intact; expected: " << needle;
  EXPECT_NE(problems[0].find(needle), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find(f.rank_file.string()), std::string::npos) << problems[0];
  std::string loader = "accepted";
  try {
    CheckpointReader reader(f.tag_dir);
    consolidate(reader, f.tag_dir.parent_path() / "out");
  } catch (const CheckpointError& e) {
    loader = e.what();
  }
  EXPECT_NE(loader.find(needle), std::string::npos) << loader;
  fs::remove_all(f.tag_dir.parent_path());
}

TEST(RankHeader, UntouchedCheckpointIsIntact) {
  const Forged f = forge_rank0("untouched", [](Json& h) { return h.dump(); });
  CheckpointReader reader(f.tag_dir);
  EXPECT_TRUE(reader.verify_files().empty());
  fs::remove_all(f.tag_dir.parent_path());
}

TEST(RankHeader, DtypeThatDiffersFromTheManifest) {
  // I32 has F32's size: the format is satisfied, the manifest is not.
  expect_refused_by_both(forge_rank0("dtype", [](Json& h) {
                           h[first_fragment(h, "fp32")]["dtype"] = "I32";
                           return h.dump();
                         }),
                         "is I32 of shape");
}

TEST(RankHeader, ShapeThatDiffersFromTheManifest) {
  expect_refused_by_both(forge_rank0("shape", [](Json& h) {
                           Json& t = h[first_fragment(h, "exp_avg")];
                           const int64_t numel = t["shape"][0].get<int64_t>();
                           t["shape"] = Json::array({1, numel});
                           return h.dump();
                         }),
                         "the manifest implies F32 of shape");
}

TEST(RankHeader, OverlappingOffsets) {
  expect_refused_by_both(forge_rank0("overlap", [](Json& h) {
                           Json& a = h[first_fragment(h, "fp32")];
                           Json& b = h[first_fragment(h, "exp_avg_sq")];
                           b["shape"] = a["shape"];
                           b["data_offsets"] = a["data_offsets"];
                           return h.dump();
                         }),
                         "not a valid safetensors file");
}

TEST(RankHeader, OffsetsPastTheEndOfTheFile) {
  expect_refused_by_both(forge_rank0("past_end", [](Json& h) {
                           Json& t = h["buffer/steps"];
                           t["data_offsets"][1] = t["data_offsets"][1].get<int64_t>() + (int64_t{1} << 40);
                           t["shape"] = Json::array({(int64_t{1} << 37) + 1});
                           return h.dump();
                         }),
                         "not a valid safetensors file");
}

TEST(RankHeader, TensorTheManifestNamesIsGone) {
  expect_refused_by_both(forge_rank0("renamed", [](Json& h) {
                           const std::string key = first_fragment(h, "fp32");
                           Json renamed = Json::object();
                           for (auto& [k, v] : h.items()) renamed[k == key ? "fp32/other[0:1]" : k] = v;
                           return renamed.dump();
                         }),
                         "has no tensor \"fp32/");
}

TEST(RankHeader, TensorTheManifestDoesNotName) {
  // An empty tensor at the end of the data section: the format is satisfied.
  expect_refused_by_both(forge_rank0("extra", [](Json& h) {
                           int64_t end = 0;
                           for (const auto& [k, v] : h.items()) {
                             if (k != "__metadata__") end = std::max(end, v["data_offsets"][1].get<int64_t>());
                           }
                           h["extra/x"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {end, end}}};
                           return h.dump();
                         }),
                         "holds tensor \"extra/x\", which the manifest does not name");
}

TEST(RankHeader, TensorChecksumRewritten) {
  expect_refused_by_both(forge_rank0("checksum", [](Json& h) {
                           h["__metadata__"][std::string(kTensorChecksumPrefix) + "buffer/steps"] = "0123456789abcdef";
                           return h.dump();
                         }),
                         "tensor \"buffer/steps\" does not match its checksum");
}

// A field given twice: readers that keep the last (nlohmann) and the first would read two
// different files; the one JSON reader refuses it.
TEST(RankHeader, FieldGivenTwice) {
  expect_refused_by_both(forge_rank0("duplicate", [](Json& h) {
                           std::string text = h.dump();
                           const std::string key = "\"" + first_fragment(h, "fp32") + "\":{";
                           text.replace(text.find(key), key.size(), key + "\"dtype\":\"I32\",");
                           return text;
                         }),
                         "duplicate keys");
}

}  // namespace
}  // namespace zerotrain::checkpoint
