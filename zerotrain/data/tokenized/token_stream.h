// A packed corpus: every document's tokens one after the other, whether each token is a
// training target, and where each document starts. Held in memory or mapped from the cache;
// `storage` keeps whichever it is alive, so copies are cheap and share it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace zerotrain::data::tokenized {

struct TokenStream {
  std::span<const int32_t> tokens;
  // trained[p] is 1 when token p is a target (the model is trained to predict it from the
  // tokens before it), 0 when its target is -100 (a prompt's tokens, a bos).
  std::span<const uint8_t> trained;
  // The position of each document's first token, ascending; document d ends where d + 1
  // starts (the last one at tokens.size()).
  std::span<const int64_t> document_starts;
  std::shared_ptr<const void> storage;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  int64_t documents() const { return static_cast<int64_t>(document_starts.size()); }
};

}  // namespace zerotrain::data::tokenized
