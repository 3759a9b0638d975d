// A corpus file as one packed token stream, from the cache when there is a good one
// (docs/finetune.md, "Data: JSONL and text"). No LibTorch.
//
//   jsonl   one document per line (jsonl.h), packed (packing.h)
//   text    the whole file is one document (a UTF-8 byte-order mark skipped), encoded in one
//           call so that its ids are the tokenizer's for the whole text
#pragma once

#include <cstdint>
#include <filesystem>

#include "zerotrain/data/tokenized/cache.h"
#include "zerotrain/data/tokenized/jsonl.h"
#include "zerotrain/data/tokenized/text_encoder.h"
#include "zerotrain/data/tokenized/token_stream.h"

namespace zerotrain::data::tokenized {

struct TokenizedOptions {
  bool cache = true;                                // read and write <PATH>.zt-tokens/ (cache.h)
  int64_t max_line_bytes = kDefaultMaxLineBytes;    // jsonl: longest line
  int threads = 0;                                  // encoding threads; 0: the cores, at most 8
};

enum class CorpusKind { kJsonl, kText };
const char* corpus_kind_name(CorpusKind kind);   // "jsonl", "text"

struct Corpus {
  std::filesystem::path source;
  CorpusKind kind = CorpusKind::kJsonl;
  TokenStream stream;
  CacheUse cache = CacheUse::kDisabled;
};

// IoError for a file that cannot be read or parsed (jsonl.h), or that holds no document.
Corpus load_corpus(const std::filesystem::path& path, CorpusKind kind, const TextEncoder& encoder,
                   const TokenizedOptions& options = {});

}  // namespace zerotrain::data::tokenized
