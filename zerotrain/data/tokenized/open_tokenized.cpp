#include "zerotrain/data/tokenized/open_tokenized.h"

#include <string>

#include "zerotrain/core/error.h"
#include "zerotrain/data/tokenized/split.h"

namespace zerotrain::data::tokenized {
namespace {

void check_block_size(const std::filesystem::path& path, int64_t block_size) {
  ZT_CHECK(block_size >= 1, UsageError, path.string(), ": block_size is ", block_size, "; it must be at least 1");
}

// One split of a loaded corpus; the stream's storage is shared, not copied.
std::shared_ptr<const TokenizedDataset> split_of(const Corpus& corpus, Split split, int64_t block_size,
                                                 const TextEncoder& encoder) {
  const SplitRange range = split_range(corpus, split, block_size);
  const std::string name =
      std::string(corpus_kind_name(corpus.kind)) + " " + corpus.source.filename().string() + " " + split_name(split);
  return std::make_shared<const TokenizedDataset>(corpus.stream, range.begin, range.end, block_size,
                                                  encoder.vocab_size, name, range.documents, corpus.cache);
}

std::shared_ptr<const TokenizedDataset> open_corpus(const std::filesystem::path& path, CorpusKind kind, Split split,
                                                    int64_t block_size, const TextEncoder& encoder,
                                                    const TokenizedOptions& options) {
  check_block_size(path, block_size);
  return split_of(load_corpus(path, kind, encoder, options), split, block_size, encoder);
}

}  // namespace

TokenizedSplits open_tokenized_splits(const std::filesystem::path& path, CorpusKind kind, int64_t block_size,
                                      const TextEncoder& encoder, bool with_eval, const TokenizedOptions& options) {
  check_block_size(path, block_size);
  const Corpus corpus = load_corpus(path, kind, encoder, options);
  TokenizedSplits out;
  out.train = split_of(corpus, Split::kTrain, block_size, encoder);
  if (with_eval) out.eval = split_of(corpus, Split::kEval, block_size, encoder);
  return out;
}

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
