// The packed token stream of a corpus, cached beside it so that the next run (every rank of
// it) maps it instead of tokenising again (docs/finetune.md, "Data: JSONL and text").
//
//   <PATH>.zt-tokens/<key>.bin     key: 16 hex digits, see cache_key
//
// The file: a 64-byte header (magic "ZTTOKENS", format version, key, counts, the XXH3-64 of
// the payload), then the payload: int64 document starts, int32 tokens, uint8 trained flags.
// It is mapped read-only and checked whole before use (header, size, checksum, every id in the
// vocabulary, starts ascending): a damaged or mismatching file is never trusted, only rebuilt.
// It is written under a temporary name unique to the process and renamed into place, so ranks
// that build the same cache at once each rename a whole, identical file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "zerotrain/data/tokenized/text_encoder.h"
#include "zerotrain/data/tokenized/token_stream.h"

namespace zerotrain::data::tokenized {

inline constexpr uint32_t kCacheFormatVersion = 1;
inline constexpr const char* kCacheFolderSuffix = ".zt-tokens";

// XXH3-64 of: the format version, `mode` ("jsonl", "text": how the source becomes documents),
// the source's size and the XXH3-64 of its bytes (read whole: a copied or touched file keeps
// its cache, an edited one does not), and the encoder's fingerprint, vocabulary size, eos and bos.
uint64_t cache_key(const std::filesystem::path& source, std::string_view mode, const TextEncoder& encoder);

// <source>.zt-tokens/<key>.bin
std::filesystem::path cache_file(const std::filesystem::path& source, uint64_t key);

// The stream in `file`, mapped, when the file exists, is whole and was written for `key`.
// std::nullopt when it does not exist, or (with `problem` set to why) when it cannot be used.
std::optional<TokenStream> read_cache(const std::filesystem::path& file, uint64_t key, int64_t vocab_size,
                                      std::string& problem);

struct CacheWrite {
  bool written = false;
  bool unwritable = false;   // the folder cannot be created or written (permissions, read-only)
  std::string problem;       // why not, when not written
};
// Writes `stream` to `file` atomically. Never throws for a failed write: a cache is an
// optimisation, and a run goes on without it.
CacheWrite write_cache(const std::filesystem::path& file, uint64_t key, const TokenStream& stream);

// What a corpus's opening did with its cache.
enum class CacheUse {
  kDisabled,     // the option turned it off
  kRead,         // mapped from the cache: nothing was tokenised
  kWritten,      // tokenised, and the cache written
  kRebuilt,      // the cache was damaged or stale: tokenised again, and rewritten (a warning)
  kNotWritten,   // tokenised; the cache could not be written (logged) and the run goes on
};
const char* cache_use_name(CacheUse use);

struct CachedStream {
  TokenStream stream;
  CacheUse use = CacheUse::kDisabled;
};
// The cached stream of `source` when there is a good one; otherwise `build()`, then written.
CachedStream cached_stream(const std::filesystem::path& source, std::string_view mode, const TextEncoder& encoder,
                           bool enabled, const std::function<TokenStream()>& build);

}  // namespace zerotrain::data::tokenized
