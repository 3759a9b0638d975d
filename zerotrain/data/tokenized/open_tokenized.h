// Tokenised corpora for fine-tuning language models (docs/finetune.md, "Data: JSONL and text"):
// a JSON Lines file of {"text"} or {"prompt", "completion"} documents, or a plain text file,
// tokenised with `encoder`, packed into one stream, cached beside the file and read in blocks
// of `block_size` tokens. The samples are a pure function of (file, tokenizer, block_size):
// nothing depends on the world size or the number of threads.
//
//   auto train = data::tokenized::open_tokenized_jsonl("data.jsonl", data::Split::kTrain, 512,
//                                                      data::tokenized::encoder_of(tokenizer));
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "zerotrain/data/dataset.h"
#include "zerotrain/data/tokenized/corpus.h"
#include "zerotrain/data/tokenized/text_encoder.h"
#include "zerotrain/data/tokenized/tokenized_dataset.h"

namespace zerotrain::data::tokenized {

// IoError for a file that cannot be read, a malformed line (naming the line and the fix), no
// documents, no eval split (fewer than 10 documents), or a split too short for one block.
std::shared_ptr<const TokenizedDataset> open_tokenized_jsonl(const std::filesystem::path& path, Split split,
                                                             int64_t block_size, const TextEncoder& encoder,
                                                             const TokenizedOptions& options = {});

// The whole file is one document; the eval split is its last 10% of tokens.
std::shared_ptr<const TokenizedDataset> open_tokenized_text(const std::filesystem::path& path, Split split,
                                                            int64_t block_size, const TextEncoder& encoder,
                                                            const TokenizedOptions& options = {});

// Both splits from one read of the file: one hash of it, and one tokenisation or cache read,
// where opening each split on its own does both twice. `eval` is null unless `with_eval`.
struct TokenizedSplits {
  std::shared_ptr<const TokenizedDataset> train, eval;
};
TokenizedSplits open_tokenized_splits(const std::filesystem::path& path, CorpusKind kind, int64_t block_size,
                                      const TextEncoder& encoder, bool with_eval, const TokenizedOptions& options = {});

}  // namespace zerotrain::data::tokenized
