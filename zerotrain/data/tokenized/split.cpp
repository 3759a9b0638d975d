#include "zerotrain/data/tokenized/split.h"

#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::data::tokenized {
namespace {

std::string documents_text(int64_t n) { return std::to_string(n) + (n == 1 ? " document" : " documents"); }

}  // namespace

SplitRange split_range(const Corpus& corpus, Split split, int64_t block_size) {
  const std::string source = corpus.source.string();
  ZT_CHECK(block_size >= 1, UsageError, source, ": block_size is ", block_size, "; it must be at least 1");
  const TokenStream& stream = corpus.stream;
  const int64_t total = stream.size();
  const bool train = split == Split::kTrain;
  SplitRange range;
  int64_t train_end = 0;
  std::string part;
  std::string counts;
  if (corpus.kind == CorpusKind::kJsonl) {
    const int64_t n = stream.documents();
    const int64_t eval_documents = n / 10;
    ZT_CHECK(train || eval_documents > 0, IoError, source, " has ", documents_text(n),
             ": its eval split is the last 10% of the documents (floor(", n, " / 10) = 0), so it needs at least 10; "
             "add documents, evaluate on another file, or turn evaluation off");
    const int64_t train_documents = n - eval_documents;
    train_end = eval_documents > 0 ? stream.document_starts[static_cast<size_t>(train_documents)] : total;
    range.documents = train ? train_documents : eval_documents;
    part = train ? "the first " + documents_text(train_documents) : "the last " + documents_text(eval_documents);
    counts = documents_text(n) + ", " + std::to_string(total) + " tokens";
  } else {
    train_end = total - total / 10;
    part = train ? "the first 90% of the tokens" : "the last 10% of the tokens";
    counts = std::to_string(total) + " tokens";
  }
  range.begin = train ? 0 : train_end;
  range.end = train ? train_end : total;
  const int64_t length = range.end - range.begin;
  if (length < block_size + 1) {
    const int64_t largest = length - 1;   // the largest block this split holds
    throw IoError(source + " (" + counts + "): its " + split_name(split) + " split (" + part + ", " +
                  std::to_string(length) + " tokens) is too short for one block of " + std::to_string(block_size) +
                  " tokens, which needs " + std::to_string(block_size + 1) + " tokens; " +
                  (largest >= 1 ? "use a block size of at most " + std::to_string(largest) +
                                      " or more data"
                                : std::string("use more data")));
  }
  return range;
}

}  // namespace zerotrain::data::tokenized
