// Which part of a packed corpus each split reads (docs/finetune.md, "Data: JSONL and text").
//
//   jsonl   whole documents: of n documents, the last floor(n / 10) evaluate, the others train.
//           With fewer than 10 documents there is no eval split: asking for it is an IoError
//           saying so (the train split is then every document).
//   text    tokens, as the byte-level text dataset does with bytes: of L tokens, the last
//           floor(L / 10) evaluate, the others train.
//
// No sample crosses the boundary, so nothing evaluated is trained on. A split too short for
// one block (block_size + 1 tokens) is an IoError naming the file, its tokens and the block size.
#pragma once

#include <cstdint>

#include "zerotrain/data/dataset.h"
#include "zerotrain/data/tokenized/corpus.h"

namespace zerotrain::data::tokenized {

struct SplitRange {
  int64_t begin = 0, end = 0;   // stream positions [begin, end)
  int64_t documents = -1;       // whole documents in it; -1 for a text corpus (part of one)
};

SplitRange split_range(const Corpus& corpus, Split split, int64_t block_size);

}  // namespace zerotrain::data::tokenized
