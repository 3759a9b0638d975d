// libFuzzer target for the checkpoint reader (docs/fuzzing.md): a real small checkpoint (a
// manifest and two rank files, written by the engine's writer code through
// tests/support/synthetic_checkpoint.h) with one of its files replaced by the input, then
// everything a loader and the checkpoint tools do with a tag: open it with CheckpointReader,
// read every tensor the manifest names, verify_files, consolidate to safetensors. A tag that
// verify_files (`checkpoint inspect`) calls intact must then be read by a loader without an
// error: the two run the same header and range checks.
//
// Input: byte 0 picks the file, (byte 0 & 0x7f) % 3: the manifest or rank file 0 or 1; the
// rest of the input is that file's content. When bit 7 of byte 0 is set and a rank file is
// replaced, the manifest's size and checksums of that file are recomputed, so a mutated
// header gets past the checksums into parse_safetensors_header and the read paths instead of
// being refused at the first check.
//
// A zerotrain::Error is the reader's answer to bad input, so it is caught, except an
// InternalError (a broken invariant). Anything else escapes on purpose: it reaches
// std::terminate, and libFuzzer reports the abort like a crash or an ASan/UBSan/LSan report.
//
// ZEROTRAIN_FUZZ_WRITE_SEEDS=DIR writes the seed corpus (each file of the base checkpoint,
// as is and with bit 7 set) into DIR and exits: how fuzz/corpus/checkpoint/ was made.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/synthetic_checkpoint.h"
#include "zerotrain/checkpoint/consolidate.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"

namespace {

namespace fs = std::filesystem;
namespace ckpt = zerotrain::checkpoint;

struct BaseFile {
  std::string name;
  std::string bytes;
};

fs::path g_root;                   // this process's scratch directory
std::vector<BaseFile> g_files;     // manifest.json, rank_00000.safetensors, rank_00001.safetensors

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A zerotrain::Error other than InternalError is an answer to the input; an InternalError
// is a broken invariant, so it escapes and is reported like a crash. With `strict` (the
// base checkpoint itself) nothing may fail.
template <class F>
void expecting_errors(F&& step, bool strict = false) {
  try {
    step();
  } catch (const zerotrain::InternalError&) {
    throw;
  } catch (const zerotrain::Error&) {
    if (strict) throw;
  }
}

// The base checkpoint: two ranks, parameters straddling them, a frozen bf16 parameter and
// an I64 buffer: every kind of tensor a tag holds, in a few KB.
void make_base() {
  zerotrain::test::SyntheticSpec spec;
  spec.world_size = 2;
  spec.params = {{"emb.weight", {3, 2}}, {"fc.bias", {3}}};
  spec.frozen = {{"frozen.weight", {2}, ckpt::Dtype::kBF16}};
  spec.buffers = {{"steps", {}, ckpt::Dtype::kI64}};
  const fs::path base = g_root / "base";
  zerotrain::test::write_synthetic_checkpoint(base, spec);
  for (const char* name : {"manifest.json", "rank_00000.safetensors", "rank_00001.safetensors"}) {
    g_files.push_back({name, read_file(base / spec.tag / name)});
  }
  fs::remove_all(base);
}

// The manifest with rank `rank`'s file record describing `bytes`.
std::string patched_manifest(int rank, const std::string& bytes) {
  ckpt::Json manifest = ckpt::Json::parse(g_files[0].bytes);
  uint64_t n = 0;
  for (int i = 7; i >= 0 && bytes.size() >= 8; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  const size_t header = bytes.size() >= 8 && n <= bytes.size() - 8 ? 8 + static_cast<size_t>(n) : bytes.size();
  auto& record = manifest["files"][static_cast<size_t>(rank)];
  record["bytes"] = bytes.size();
  record["xxh3_64"] = ckpt::to_hex(ckpt::checksum_of(bytes.data(), static_cast<int64_t>(bytes.size())));
  record["header_xxh3_64"] = ckpt::to_hex(ckpt::checksum_of(bytes.data(), static_cast<int64_t>(header)));
  return manifest.dump(1);
}

// Reads every tensor the manifest names whose header entry has the size the manifest
// implies (the buffer is allocated only then, so its size comes from the file, which is
// bounded, not from the manifest, which is not).
void read_everything(ckpt::CheckpointReader& reader, bool strict) {
  const ckpt::Manifest& m = reader.manifest();
  auto read = [&](int rank, const std::string& key, ckpt::Dtype dtype, int64_t nbytes) {
    expecting_errors([&] {
      const ckpt::TensorEntry* e = reader.header(rank).find(key);
      if (e == nullptr || e->nbytes() != nbytes) {
        if (strict) throw std::logic_error("the base checkpoint lacks " + key);
        return;
      }
      std::vector<char> out(static_cast<size_t>(nbytes));
      reader.read_tensor(rank, key, dtype, out.data(), nbytes);
    }, strict);
  };
  std::vector<std::string> states{"fp32"};
  states.insert(states.end(), m.optimizer_states.begin(), m.optimizer_states.end());
  for (const auto& p : m.params) {
    for (const auto& f : p.fragments) {
      for (const auto& state : states) read(f.rank, ckpt::fragment_key(state, p.name, f), ckpt::Dtype::kF32, f.numel() * 4);
    }
  }
  auto wholes = [&](const std::vector<ckpt::WholeTensor>& list, const std::string& prefix) {
    for (const auto& t : list) {
      const auto dtype = ckpt::dtype_from_tag(t.dtype);
      if (!dtype) continue;
      int64_t numel = 1;
      for (int64_t d : t.shape) {
        if (__builtin_mul_overflow(numel, d, &numel)) return;
      }
      int64_t nbytes = 0;
      if (!__builtin_mul_overflow(numel, ckpt::dtype_size(*dtype), &nbytes)) read(0, prefix + t.name, *dtype, nbytes);
    }
  };
  wholes(m.frozen, "frozen/");
  wholes(m.buffers, "buffer/");
  for (int rank = 0; rank < m.world_size; ++rank) {
    expecting_errors([&] {
      const ckpt::TensorEntry* e = reader.header(rank).find("rng/cpu");
      if (e != nullptr) read(rank, "rng/cpu", ckpt::Dtype::kU8, e->nbytes());
    }, strict);
  }
}

// What a loader and the checkpoint tools do with the tag in `save_dir`.
void exercise(const fs::path& save_dir, bool strict) {
  const fs::path out_dir = g_root / "out";
  fs::remove_all(out_dir);
  expecting_errors([&] {
    const ckpt::LocatedTag located = ckpt::locate_tag(save_dir, "");
    (void)ckpt::list_directory(located.save_dir);
    ckpt::CheckpointReader reader(located.tag_dir);
    read_everything(reader, strict);
    const auto problems = reader.verify_files();
    if (strict && !problems.empty()) throw std::logic_error("the base checkpoint is damaged: " + problems[0]);
    // What `checkpoint inspect` calls intact, every loader reads: a fresh reader must then
    // read every tensor the manifest names without an error (an Error here escapes).
    if (problems.empty()) {
      ckpt::CheckpointReader again(located.tag_dir);
      try {
        read_everything(again, /*strict=*/true);
      } catch (const zerotrain::Error& e) {
        throw std::logic_error(std::string("verify_files found the tag intact, but a loader refuses it: ") + e.what());
      }
    }
  }, strict);
  for (auto dtype : {ckpt::Dtype::kF32, ckpt::Dtype::kBF16}) {
    expecting_errors([&] {
      ckpt::CheckpointReader reader(save_dir / "global_step3");
      ckpt::consolidate(reader, out_dir, {.dtype = dtype, .max_shard_bytes = dtype == ckpt::Dtype::kF32 ? 5'000'000'000 : 16});
    }, strict);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A ZEROTRAIN_LOG_LEVEL given by the caller wins.
  setenv("ZEROTRAIN_LOG_LEVEL", "off", /*overwrite=*/0);
  // tmpfs where there is one: every input writes a few files, and AtomicFile fsyncs.
  const fs::path scratch = fs::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm")
                                                                                             : fs::temp_directory_path();
  g_root = scratch / ("zerotrain-checkpoint-fuzz-" + std::to_string(::getpid()));
  fs::remove_all(g_root);
  fs::create_directories(g_root);
  make_base();
  // The unmutated base must go through every step without an error; otherwise the target
  // would exercise nothing but the first check.
  const fs::path base = g_root / "ckpt";
  fs::create_directories(base / "global_step3");
  for (const BaseFile& f : g_files) write_file(base / "global_step3" / f.name, f.bytes);
  write_file(base / "latest", "global_step3");
  exercise(base, /*strict=*/true);
  if (const char* seeds = std::getenv("ZEROTRAIN_FUZZ_WRITE_SEEDS")) {
    fs::create_directories(seeds);
    for (size_t i = 0; i < g_files.size(); ++i) {
      for (unsigned char patch : {0x00, 0x80}) {
        if (i == 0 && patch) continue;   // the manifest has no checksum to patch
        write_file(fs::path(seeds) / (g_files[i].name + (patch ? ".patched" : "")),
                   std::string(1, static_cast<char>(i | patch)) + g_files[i].bytes);
      }
    }
    fs::remove_all(g_root);
    std::exit(0);
  }
  std::atexit([] { fs::remove_all(g_root); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t which = (data[0] & 0x7f) % g_files.size();
  const bool patch = (data[0] & 0x80) != 0 && which > 0;
  const std::string content(reinterpret_cast<const char*>(data) + 1, size - 1);

  const fs::path save_dir = g_root / "ckpt", tag_dir = save_dir / "global_step3";
  fs::create_directories(tag_dir);
  for (size_t i = 0; i < g_files.size(); ++i) {
    std::string bytes = i == which ? content : g_files[i].bytes;
    if (i == 0 && patch) bytes = patched_manifest(static_cast<int>(which) - 1, content);
    write_file(tag_dir / g_files[i].name, bytes);
  }
  write_file(save_dir / "latest", "global_step3");
  exercise(save_dir, /*strict=*/false);
  return 0;
}
