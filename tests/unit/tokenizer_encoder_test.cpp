// A text::Tokenizer as the tokenised datasets' encoder (zerotrain/data/tokenized/
// tokenizer_encoder.h): its ids, eos, bos and fingerprint reach the packed stream and the cache key.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/data/tokenized/open_tokenized.h"
#include "zerotrain/data/tokenized/tokenizer_encoder.h"
#include "zerotrain/text/tokenizer.h"

namespace zerotrain::data::tokenized {
namespace {

namespace fs = std::filesystem;

// A BPE over a, b, c (ab: 3, abc: 4) with <|endoftext|> at 9 and, when asked, <s> at 5.
std::string tiny_tokenizer(bool with_bos) {
  const std::string bos = with_bos ? R"(, {"id": 5, "content": "<s>", "single_word": false, "lstrip": false,
       "rstrip": false, "normalized": false, "special": true})"
                                   : "";
  return R"({"version": "1.0", "added_tokens": [
      {"id": 9, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true})" +
         bos + R"(],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
      "merges": [["a", "b"], ["ab", "c"]]}})";
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const at::Tensor x = t[r].contiguous();
  return {x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()};
}

TEST(TokenizedTokenizerEncoder, PacksTheTokenizersIds) {
  const text::Tokenizer tokenizer = text::Tokenizer::from_json(tiny_tokenizer(true), "tiny");
  const TextEncoder encoder = encoder_of(tokenizer, /*add_bos=*/true);
  EXPECT_EQ(encoder.eos_id, 9);
  EXPECT_EQ(encoder.bos_id, 5);
  EXPECT_EQ(encoder.vocab_size, 10);
  EXPECT_EQ(encoder.fingerprint, tokenizer.fingerprint());
  EXPECT_FALSE(encoder_of(tokenizer).bos_id.has_value());

  const fs::path dir = fs::temp_directory_path() / ("zt_tok_encoder_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "sft.jsonl";
  std::ofstream(path) << "{\"prompt\": \"ab\", \"completion\": \"cab\"}\n{\"text\": \"abcab\"}\n";
  // "ab" + "cab" encodes whole as [abc ab]: its first token straddles the prompt's end, so it
  // is trained. Stream: <s> abc ab <eos> <s> abc ab <eos>; only the second <s> is a masked target.
  auto dataset = open_tokenized_jsonl(path, Split::kTrain, 7, encoder);
  ASSERT_EQ(dataset->size(), 1);
  const Batch batch = dataset->get({0});
  EXPECT_EQ(row(batch.inputs, 0), (std::vector<int64_t>{5, 4, 3, 9, 5, 4, 3}));
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int64_t>{4, 3, 9, kIgnoreIndex, 4, 3, 9}));
  EXPECT_EQ(dataset->cache_use(), CacheUse::kWritten);
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 7, encoder)->cache_use(), CacheUse::kRead);
  fs::remove_all(dir);
}

TEST(TokenizedTokenizerEncoder, ABosAskedOfATokenizerWithoutOneIsAConfigError) {
  const text::Tokenizer tokenizer = text::Tokenizer::from_json(tiny_tokenizer(false), "tiny");
  try {
    encoder_of(tokenizer, /*add_bos=*/true);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bos_token"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zerotrain::data::tokenized
