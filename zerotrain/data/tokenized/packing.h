// Documents into one token stream (docs/finetune.md, "Data: JSONL and text"): each document is
// [bos] prompt completion eos (bos when the encoder has one), documents one after the other.
// As TRL's SFTTrainer does, prompt + completion is encoded whole (so the ids are the
// tokenizer's for the whole document, whatever it does at the start of a text) and the prompt
// alone; the prompt's tokens are the leading ids both share. Where a token straddles the
// boundary (it holds the prompt's end and the completion's start), it belongs to the
// completion: the model must produce it. Trained: the completion's tokens and the eos after
// them (a model fine-tuned to stop must learn to predict eos); not trained: the bos and the
// prompt. A "text" document is a document with no prompt: all of it trained but its bos.
//
// Encoding runs on several threads, batch by batch; the stream is the same for any number of
// threads (each document's ids depend on that document only, and are appended in order).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "zerotrain/data/tokenized/document.h"
#include "zerotrain/data/tokenized/text_encoder.h"
#include "zerotrain/data/tokenized/token_stream.h"

namespace zerotrain::data::tokenized {

struct PackOptions {
  int threads = 0;                            // encoding threads; 0: the cores, at most 8
  int64_t batch_bytes = int64_t{16} << 20;    // documents buffered before they are encoded
};

class Packer {
 public:
  // `source` names the corpus in errors. The encoder must outlive the packer.
  Packer(const TextEncoder& encoder, std::string source, const PackOptions& options = {});

  void add(Document&& document);
  // The stream of every document added; the packer is empty afterwards.
  TokenStream finish();

 private:
  void encode_pending();

  const TextEncoder& encoder_;
  std::string source_;
  int threads_;
  int64_t batch_bytes_;
  std::vector<Document> pending_;
  int64_t pending_bytes_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> trained_;
  std::vector<int64_t> starts_;
};

// Convenience for a corpus held in memory.
TokenStream pack_documents(std::vector<Document> documents, const TextEncoder& encoder, const std::string& source,
                           const PackOptions& options = {});

}  // namespace zerotrain::data::tokenized
