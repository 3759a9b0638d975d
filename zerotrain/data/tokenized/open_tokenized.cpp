#include "zerotrain/data/tokenized/open_tokenized.h"

#include <string>

#include "zerotrain/core/error.h"
#include "zerotrain/data/tokenized/split.h"

namespace zerotrain::data::tokenized {
namespace {

std::shared_ptr<const TokenizedDataset> open_corpus(const std::filesystem::path& path, CorpusKind kind, Split split,
                                                    int64_t block_size, const TextEncoder& encoder,
                                                    const TokenizedOptions& options) {
  ZT_CHECK(block_size >= 1, UsageError, path.string(), ": block_size is ", block_size, "; it must be at least 1");
  Corpus corpus = load_corpus(path, kind, encoder, options);
  const SplitRange range = split_range(corpus, split, block_size);
  const std::string name =
      std::string(corpus_kind_name(kind)) + " " + path.filename().string() + " " + split_name(split);
  return std::make_shared<const TokenizedDataset>(std::move(corpus.stream), range.begin, range.end, block_size,
                                                  encoder.vocab_size, name, range.documents, corpus.cache);
}

}  // namespace

std::shared_ptr<const TokenizedDataset> open_tokenized_jsonl(const std::filesystem::path& path, Split split,
                                                             int64_t block_size, const TextEncoder& encoder,
                                                             const TokenizedOptions& options) {
  return open_corpus(path, CorpusKind::kJsonl, split, block_size, encoder, options);
}

std::shared_ptr<const TokenizedDataset> open_tokenized_text(const std::filesystem::path& path, Split split,
                                                            int64_t block_size, const TextEncoder& encoder,
                                                            const TokenizedOptions& options) {
  return open_corpus(path, CorpusKind::kText, split, block_size, encoder, options);
}

}  // namespace zerotrain::data::tokenized
