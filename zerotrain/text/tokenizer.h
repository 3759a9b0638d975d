// A Hugging Face tokenizer.json in C++: the byte-level BPE of GPT-2, Llama 3 and Qwen2, and the
// SentencePiece-style BPE with byte fallback of Llama 2 and Mistral, with the normalizers,
// pre-tokenizer regexes and added/special tokens those use. The ids are the `tokenizers`
// package's, bit for bit (docs/finetune.md). No LibTorch.
//
//   auto tok = zerotrain::text::Tokenizer::from_folder("my-model");   // DIR/tokenizer.json
//   std::vector<int32_t> ids = tok.encode("In the beginning");
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zerotrain::text {

// The files a Hugging Face folder keeps its tokenizer in: tokenizer.json (what this reader
// runs), and those transformers' other tokenizer classes read. A folder written back carries
// them together, never a mix of two tokenizers'.
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json",          "tokenizer_config.json",
                                                  "special_tokens_map.json", "tokenizer.model",
                                                  "vocab.json",              "merges.txt"};

class Tokenizer {
 public:
  // DIR/tokenizer.json (and, when present, DIR/tokenizer_config.json for the EOS/BOS tokens'
  // names). IoError when the folder has no tokenizer.json; ConfigError naming the file and
  // the field for a tokenizer.json this reader cannot run exactly (an unknown model,
  // normalizer, pre-tokenizer or decoder type, a malformed vocabulary or merge).
  static Tokenizer from_folder(const std::filesystem::path& dir);
  // One tokenizer.json's text; `origin` names it in errors.
  static Tokenizer from_json(std::string_view json, const std::string& origin);

  // The ids `tokenizers`' Tokenizer.encode(text, add_special_tokens=...).ids gives. Invalid
  // UTF-8 in `text` is replaced by U+FFFD first, as Python's str would have it.
  // Thread-safe (const).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // The text of `ids` as `tokenizers`' decode(ids, skip_special_tokens=...) gives it.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // The largest id plus one (the vocabulary and the added tokens).
  int64_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The end- and beginning-of-text tokens: tokenizer_config.json's eos_token/bos_token when
  // the folder has one; otherwise the usual names ("<|endoftext|>", "</s>", "<s>",
  // "<|end_of_text|>", "<|begin_of_text|>") when the vocabulary has them.
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> bos_id() const;
  // A checksum (hex) of the tokenizer's files: part of a tokenised-corpus cache's key.
  const std::string& fingerprint() const;

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerotrain::text
