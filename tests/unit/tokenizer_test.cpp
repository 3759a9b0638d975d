// zerotrain/text: a tokenizer.json read and run. Tiny handwritten files for each feature and
// each class of bad input; the parity with the tokenizers package on real-size tokenizers is
// tests/python/test_tokenizer_parity.py.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "zerotrain/core/error.h"
#include "zerotrain/text/tokenizer.h"
#include "zerotrain/text/utf8.h"

using zerotrain::text::Tokenizer;

namespace {

// A BPE over a, b, c with two merges; `model_extra`, `top_extra` add fields.
std::string tiny(const std::string& model_extra = "", const std::string& top_extra = "",
                 const std::string& vocab_extra = "") {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 9, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null)" +
         top_extra + R"(,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4)" +
         vocab_extra + R"(},
      "merges": [["a", "b"], ["ab", "c"]])" +
         model_extra + "}}";
}

std::vector<int32_t> ids(std::initializer_list<int32_t> list) { return list; }

// The ConfigError message `json` gives, or "" when it loads.
std::string error_of(const std::string& json) {
  try {
    Tokenizer::from_json(json, "tok/tokenizer.json");
  } catch (const zerotrain::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Tokenizer, MergesByRank) {
  const Tokenizer tok = Tokenizer::from_json(tiny(), "tiny");
  EXPECT_EQ(tok.encode("abc"), ids({4}));
  EXPECT_EQ(tok.encode("abcab"), ids({4, 3}));
  EXPECT_EQ(tok.encode("cba"), ids({2, 1, 0}));
  EXPECT_EQ(tok.vocab_size(), 10);
  EXPECT_EQ(tok.token_to_id("ab"), 3);
  EXPECT_EQ(tok.eos_id(), 9);
  EXPECT_FALSE(tok.bos_id().has_value());
  EXPECT_EQ(tok.fingerprint().size(), 32u);
}

TEST(Tokenizer, OldMergeSpellingIsTheSame) {
  std::string json = tiny();
  const std::string list_form = R"([["a", "b"], ["ab", "c"]])";
  json.replace(json.find(list_form), list_form.size(), R"(["a b", "ab c"])");
  EXPECT_EQ(Tokenizer::from_json(json, "old").encode("abcab"), ids({4, 3}));
}

TEST(Tokenizer, AddedTokensAreNeverSplit) {
  const Tokenizer tok = Tokenizer::from_json(tiny(), "tiny");
  EXPECT_EQ(tok.encode("ab<|endoftext|>c"), ids({3, 9, 2}));
  EXPECT_EQ(tok.decode({3, 9, 2}), "ab <|endoftext|> c");   // no decoder: joined with spaces
  EXPECT_EQ(tok.decode({3, 9, 2}, /*skip_special_tokens=*/true), "ab c");
}

TEST(Tokenizer, ByteFallbackAndUnknown) {
  const std::string fallback = tiny(R"(, "byte_fallback": true, "unk_token": "<unk>")", "",
                                    R"(, "<unk>": 5, "<0xC3>": 6, "<0xA9>": 7)");
  const Tokenizer tok = Tokenizer::from_json(fallback, "fallback");
  EXPECT_EQ(tok.encode("a\xC3\xA9"), ids({0, 6, 7}));   // "aé": é spelled by its bytes
  EXPECT_EQ(tok.encode("a\xE2\x82\xAC"), ids({0, 5}));   // "a€": no <0xE2>, so <unk>
  const std::string fused = tiny(R"(, "unk_token": "<unk>", "fuse_unk": true)", "", R"(, "<unk>": 5)");
  EXPECT_EQ(Tokenizer::from_json(fused, "fused").encode("xyab"), ids({5, 3}));
}

TEST(Tokenizer, IgnoreMergesTakesWholeWords) {
  // "bc" is in the vocabulary but no merge makes it: only ignore_merges finds it.
  const std::string json = tiny(R"(, "ignore_merges": true)", "", R"(, "bc": 8)");
  EXPECT_EQ(Tokenizer::from_json(json, "whole").encode("bc"), ids({8}));
  EXPECT_EQ(Tokenizer::from_json(tiny("", "", R"(, "bc": 8)"), "merged").encode("bc"), ids({1, 2}));
}

TEST(Tokenizer, InvalidUtf8IsReplacedAsPythonDoes) {
  using zerotrain::text::to_valid_utf8;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(to_valid_utf8("a\xFF" "b"), "a" + fffd + "b");
  EXPECT_EQ(to_valid_utf8("\xE2\x82"), fffd);                          // a truncated sequence: one
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98" "a"), fffd + "a");
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);        // a surrogate: one per byte
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), fffd + fffd);                   // an overlong form
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);   // above U+10FFFF
  EXPECT_EQ(to_valid_utf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  // The tokenizer sees U+FFFD, which this vocabulary lacks: dropped before the merges, as
  // tokenizers does without an unk_token, so "a" and "b" meet.
  EXPECT_EQ(Tokenizer::from_json(tiny(), "tiny").encode("a\xFF" "b"), ids({3}));
}

TEST(Tokenizer, PreTokenizerNormalizerAndTemplate) {
  const std::string json = tiny("", R"(, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "x"}, "content": "a"}]},
      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false},
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>",
        "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {
        "<|endoftext|>": {"id": "<|endoftext|>", "ids": [9], "tokens": ["<|endoftext|>"]}}})");
  const Tokenizer tok = Tokenizer::from_json(json, "template");
  EXPECT_EQ(tok.encode("xb c  ab"), ids({3, 2, 3}));   // "ab" "c" "ab": "ab c" never meet
  EXPECT_EQ(tok.encode("xb c", /*add_special_tokens=*/true), ids({9, 3, 2}));
}

TEST(Tokenizer, DecodersOfLlama2) {
  // <0xC3><0xA9> is "é"; a lone <0xC3> is invalid UTF-8: one U+FFFD per byte, as tokenizers.
  const std::string json = tiny("", R"(, "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "c"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})",
                                R"(, "<0xC3>": 6, "<0xA9>": 7)");
  const Tokenizer tok = Tokenizer::from_json(json, "llama2-decoders");
  EXPECT_EQ(tok.decode({2, 0, 6, 7, 2, 1}), "a\xC3\xA9 b");       // the leading " " stripped once
  EXPECT_EQ(tok.decode({0, 6, 1}), "a\xEF\xBF\xBD" "b");
}

TEST(Tokenizer, WhitespaceMeansWhatOnigurumaMeans) {
  // U+0085 (NEXT LINE) is \s to Oniguruma, which tokenizers' Split regexes run on.
  const std::string json = tiny("", R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"},
      "behavior": "Removed", "invert": false})",
                                R"(, "\u0085": 8)");
  EXPECT_EQ(Tokenizer::from_json(json, "nel").encode("ab\xC2\x85" "c"), ids({3, 2}));
}

TEST(TokenizerErrors, EachNamesTheFileAndField) {
  {
    const std::string e = error_of("{not json");
    EXPECT_NE(e.find("tok/tokenizer.json: not valid JSON"), std::string::npos) << e;
  }
  const std::string deep = error_of(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(deep.find("tok/tokenizer.json: nested more than 64 levels deep"), std::string::npos) << deep;
  std::string json = tiny();
  json.replace(json.find(R"("type": "BPE")"), 13, R"("type": "WordPiece")");
  EXPECT_NE(error_of(json).find("model.type: model type \"WordPiece\" is not supported"), std::string::npos)
      << error_of(json);

  json = tiny();
  json.replace(json.find(R"("vocab": {)"), 10, R"("vocab": [], "x": {)");
  EXPECT_NE(error_of(json).find("model.vocab: expected an object"), std::string::npos) << error_of(json);

  json = tiny();
  json.replace(json.find(R"(["ab", "c"])"), 11, R"(["ab", "z"])");
  EXPECT_NE(error_of(json).find("tok/tokenizer.json: model.merges[1]: the token \"z\" is not in model.vocab"),
            std::string::npos)
      << error_of(json);

  json = tiny();
  json.replace(json.find(R"(["a", "b"])"), 10, R"(["a", "b", "c"])");
  EXPECT_NE(error_of(json).find("model.merges[0]: expected a pair of tokens"), std::string::npos) << error_of(json);

  EXPECT_NE(error_of(tiny("", R"(, "normalizer": {"type": "BertNormalizer"})"))
                .find("normalizer.type: normalizer type \"BertNormalizer\" is not supported"),
            std::string::npos);
  const std::string pre = error_of(tiny("", R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true}, {"type": "UnicodeScripts"}]})"));
  EXPECT_NE(pre.find("pre_tokenizer.pretokenizers[1].type: pre-tokenizer type \"UnicodeScripts\""),
            std::string::npos)
      << pre;
  EXPECT_NE(error_of(tiny(R"(, "dropout": 0.1)")).find("model.dropout"), std::string::npos);
  EXPECT_NE(error_of(tiny("", R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
      "behavior": "Isolated", "invert": false})"))
                .find("pre_tokenizer.pattern: the regex does not compile"),
            std::string::npos);
}

TEST(Tokenizer, EncodesFromManyThreadsAlike) {
  const Tokenizer tok = Tokenizer::from_json(tiny("", R"(, "pre_tokenizer": {"type": "ByteLevel",
      "add_prefix_space": false, "trim_offsets": true, "use_regex": true})"), "threads");
  const std::string text = "abc cab bca abcabc ab c";
  const std::vector<int32_t> want = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) mismatches += tok.encode(text) != want;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerErrors, MissingFileIsAnIoError) {
  const auto dir = std::filesystem::temp_directory_path() / "zt-tokenizer-test-empty";
  std::filesystem::create_directories(dir);
  try {
    Tokenizer::from_folder(dir);
    FAIL() << "no error";
  } catch (const zerotrain::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "tokenizer.json") << tiny();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": {"content": "c"}, "bos_token": "a"})";
  const Tokenizer tok = Tokenizer::from_folder(dir);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.bos_id(), 0);
  // A config naming a token the tokenizer lacks says which, not "the tokenizer has no eos".
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "</s>"})";
  try {
    Tokenizer::from_folder(dir);
    FAIL() << "no error";
  } catch (const zerotrain::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("names eos_token \"</s>\""), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
