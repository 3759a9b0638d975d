// Tokenised corpora for fine-tuning (zerotrain/data/tokenized/): JSONL and text files packed
// with eos (and bos), prompts masked out of the targets, the split by documents, the cache
// beside the file, and every malformed line an IoError naming the file, the line and the fix.
// A toy encoder (each byte is a token) stands in for a tokenizer.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/data/tokenized/cache.h"
#include "zerotrain/data/tokenized/jsonl.h"
#include "zerotrain/data/tokenized/open_tokenized.h"
#include "zerotrain/data/tokenized/packing.h"

namespace zerotrain::data::tokenized {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kEos = 256;
constexpr int32_t kBos = 257;
constexpr int64_t kM = kIgnoreIndex;

// Each byte is its own id; counts its calls so a test can tell a cache hit (no call) from a miss.
struct ToyEncoder {
  std::shared_ptr<std::atomic<int64_t>> calls = std::make_shared<std::atomic<int64_t>>(0);
  TextEncoder encoder(bool bos = false, const std::string& fingerprint = "toy-bytes-1") const {
    TextEncoder e;
    e.encode = [calls = calls](std::string_view text) {
      ++*calls;
      std::vector<int32_t> ids;
      for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
      return ids;
    };
    e.eos_id = kEos;
    if (bos) e.bos_id = kBos;
    e.vocab_size = 258;
    e.fingerprint = fingerprint;
    return e;
  }
};

int32_t id(char c) { return static_cast<unsigned char>(c); }

class Tokenized : public ::testing::Test {
 public:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("zt_tok_" + std::string(test->test_suite_name()) + "_" + test->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }
  // `n` documents {"text": "d<i>"}, one per line.
  fs::path numbered(const std::string& name, int n) {
    std::string lines;
    for (int i = 0; i < n; ++i) lines += "{\"text\": \"d" + std::to_string(i) + "\"}\n";
    return write(name, lines);
  }

 protected:
  fs::path dir_;
  ToyEncoder toy_;
};

// The IoError message `fn` throws; fails the test when it throws nothing or another type.
template <class E = IoError>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not the expected error type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const at::Tensor x = t[r].contiguous();
  return {x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()};
}

std::vector<int64_t> ids(const std::string& text) {
  std::vector<int64_t> out;
  for (const char c : text) out.push_back(id(c));
  return out;
}

TokenizedOptions no_cache() { return {.cache = false}; }

// --- packing --------------------------------------------------------------------------------

TEST_F(Tokenized, TextDocumentsArePackedWithEosTokenByToken) {
  const fs::path path = write("docs.jsonl", "{\"text\": \"ab\"}\n{\"text\": \"c\", \"id\": 7}\n{\"text\": \"\"}\n");
  // Stream: a b EOS c EOS EOS, all trained.
  auto train = open_tokenized_jsonl(path, Split::kTrain, 2, toy_.encoder(), no_cache());
  ASSERT_EQ(train->size(), 2);   // (6 - 1) / 2
  const Batch batch = train->get({0, 1});
  EXPECT_EQ(row(batch.inputs, 0), (std::vector<int64_t>{id('a'), id('b')}));
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int64_t>{id('b'), kEos}));
  EXPECT_EQ(row(batch.inputs, 1), (std::vector<int64_t>{kEos, id('c')}));
  EXPECT_EQ(row(batch.targets, 1), (std::vector<int64_t>{id('c'), kEos}));
  EXPECT_EQ(train->info().task, Task::kLanguageModeling);
  EXPECT_EQ(train->info().vocab_size, 258);
  EXPECT_EQ(train->info().block_size, 2);
  EXPECT_EQ(train->info().description,
            "jsonl docs.jsonl train (3 documents, 6 tokens: 2 blocks of 2, 0% of targets masked)");
  EXPECT_EQ(train->cache_use(), CacheUse::kDisabled);
  EXPECT_FALSE(fs::exists(path.string() + kCacheFolderSuffix));
}

TEST_F(Tokenized, BosStartsEachDocumentAndIsNeverATarget) {
  const fs::path path = write("docs.jsonl", "{\"text\": \"ab\"}\n{\"text\": \"c\"}\n");
  // Stream: BOS a b EOS BOS c EOS; the BOS positions untrained.
  auto train = open_tokenized_jsonl(path, Split::kTrain, 6, toy_.encoder(/*bos=*/true), no_cache());
  ASSERT_EQ(train->size(), 1);
  const Batch batch = train->get({0});
  EXPECT_EQ(row(batch.inputs, 0), (std::vector<int64_t>{kBos, id('a'), id('b'), kEos, kBos, id('c')}));
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int64_t>{id('a'), id('b'), kEos, kM, id('c'), kEos}));
  EXPECT_EQ(train->masked_targets(), 1);
}

TEST_F(Tokenized, PromptTargetsAreMaskedTokenByTokenAcrossBlocks) {
  const fs::path path = write("sft.jsonl",
                              "{\"prompt\": \"abc\", \"completion\": \"d\"}\n"
                              "{\"prompt\": \"wxyz\", \"completion\": \"q\"}\n");
  // Stream: a b c d EOS w x y z q EOS; trained: d, EOS, q, EOS. The second prompt spans
  // samples 1 and 2.
  auto train = open_tokenized_jsonl(path, Split::kTrain, 3, toy_.encoder(), no_cache());
  ASSERT_EQ(train->size(), 3);   // (11 - 1) / 3
  const Batch batch = train->get({0, 1, 2});
  EXPECT_EQ(row(batch.inputs, 0), ids("abc"));
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int64_t>{kM, kM, id('d')}));
  EXPECT_EQ(row(batch.inputs, 1), (std::vector<int64_t>{id('d'), kEos, id('w')}));
  EXPECT_EQ(row(batch.targets, 1), (std::vector<int64_t>{kEos, kM, kM}));
  EXPECT_EQ(row(batch.inputs, 2), ids("xyz"));
  EXPECT_EQ(row(batch.targets, 2), (std::vector<int64_t>{kM, kM, id('q')}));
  EXPECT_EQ(train->masked_targets(), 6);
  EXPECT_EQ(train->info().description,
            "jsonl sft.jsonl train (2 documents, 11 tokens: 3 blocks of 3, 67% of targets masked)");
}

TEST_F(Tokenized, ATokenStraddlingThePromptsEndIsTrained) {
  // A tokenizer that merges "xy" into one id: the prompt "ax" and the completion "yb" encode
  // whole as a [xy] b, where [xy] holds the prompt's last byte and the completion's first.
  TextEncoder encoder = toy_.encoder();
  encoder.vocab_size = 259;
  encoder.encode = [](std::string_view text) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.substr(i, 2) == "xy") {
        out.push_back(258);
        ++i;
      } else {
        out.push_back(static_cast<unsigned char>(text[i]));
      }
    }
    return out;
  };
  const TokenStream stream = pack_documents({{.prompt = "ax", .text = "yb"}}, encoder, "mem");
  EXPECT_EQ(std::vector<int32_t>(stream.tokens.begin(), stream.tokens.end()),
            (std::vector<int32_t>{id('a'), 258, id('b'), kEos}));
  EXPECT_EQ(std::vector<uint8_t>(stream.trained.begin(), stream.trained.end()), (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST_F(Tokenized, PackerStreamIsTheSameForAnyThreadCount) {
  std::vector<Document> documents;
  for (int i = 0; i < 300; ++i) {
    documents.push_back({.prompt = i % 3 == 0 ? "p" + std::to_string(i) : "", .text = "text " + std::to_string(i)});
  }
  const TextEncoder encoder = toy_.encoder(true);
  const TokenStream one = pack_documents(documents, encoder, "mem", {.threads = 1, .batch_bytes = 1 << 20});
  for (const int threads : {2, 5, 8}) {
    const TokenStream many = pack_documents(documents, encoder, "mem", {.threads = threads, .batch_bytes = 64});
    ASSERT_TRUE(std::equal(one.tokens.begin(), one.tokens.end(), many.tokens.begin(), many.tokens.end())) << threads;
    ASSERT_TRUE(std::equal(one.trained.begin(), one.trained.end(), many.trained.begin(), many.trained.end()));
    ASSERT_TRUE(std::equal(one.document_starts.begin(), one.document_starts.end(), many.document_starts.begin(),
                           many.document_starts.end()));
  }
  EXPECT_EQ(one.documents(), 300);
  // The dataset too: every sample, 1 thread against 8.
  std::string lines;
  for (int i = 0; i < 200; ++i) {
    lines += i % 2 ? "{\"text\": \"doc " + std::to_string(i) + " body\"}\n"
                   : "{\"prompt\": \"q" + std::to_string(i) + "\", \"completion\": \"a" + std::to_string(i) + "\"}\n";
  }
  const fs::path path = write("mixed.jsonl", lines);
  auto a = open_tokenized_jsonl(path, Split::kTrain, 16, encoder, {.cache = false, .threads = 1});
  auto b = open_tokenized_jsonl(path, Split::kTrain, 16, encoder, {.cache = false, .threads = 8});
  ASSERT_EQ(a->size(), b->size());
  std::vector<int64_t> all(static_cast<size_t>(a->size()));
  for (int64_t i = 0; i < a->size(); ++i) all[static_cast<size_t>(i)] = i;
  const Batch x = a->get(all), y = b->get(all);
  EXPECT_TRUE(at::equal(x.inputs, y.inputs));
  EXPECT_TRUE(at::equal(x.targets, y.targets));
}

TEST_F(Tokenized, IdsOutsideTheVocabularyAreAConfigError) {
  const fs::path path = write("docs.jsonl", "{\"text\": \"ab\"}\n");
  TextEncoder encoder = toy_.encoder();
  encoder.vocab_size = 98;   // 'b' is 98
  encoder.eos_id = 0;
  const std::string message = error_of<ConfigError>(
      [&] { open_tokenized_jsonl(path, Split::kTrain, 1, encoder, no_cache()); });
  EXPECT_NE(message.find("id 98"), std::string::npos) << message;
  encoder.vocab_size = 258;
  encoder.eos_id = 300;   // an encoder that is itself wrong is refused before any text
  EXPECT_NE(error_of<UsageError>([&] { open_tokenized_jsonl(path, Split::kTrain, 1, encoder, no_cache()); })
                .find("eos id 300"),
            std::string::npos);
}

// A tokenizer that fails on a text (a regex's match limit, a normalization error) says so in
// words that name no document; the error names the file and the document, the first that
// failed whatever the thread count and however the documents fall into batches.
TEST_F(Tokenized, ADocumentTheTokenizerFailsOnIsNamed) {
  TextEncoder encoder = toy_.encoder();
  encoder.encode = [](std::string_view text) -> std::vector<int32_t> {
    if (text.find("bad") != std::string_view::npos) throw std::runtime_error("regex match failed: match limit");
    return {1};
  };
  std::vector<Document> documents;
  for (int i = 0; i < 200; ++i) documents.push_back({.prompt = "", .text = i == 137 || i == 190 ? "bad" : "ok"});
  for (const int threads : {1, 2, 8}) {
    for (const int64_t batch_bytes : {int64_t{1} << 20, int64_t{16}}) {
      const std::string message = error_of([&] {
        pack_documents(documents, encoder, "corpus.jsonl", {.threads = threads, .batch_bytes = batch_bytes});
      });
      EXPECT_NE(message.find("corpus.jsonl document 138 could not be tokenised: regex match failed: match limit"),
                std::string::npos)
          << threads << " threads, batches of " << batch_bytes << " bytes: " << message;
    }
  }
  // From a JSONL file, the line (blank lines counted), as the reader's own errors name it.
  const fs::path path = write("docs.jsonl", "{\"text\": \"ok\"}\n\n{\"prompt\": \"q\", \"completion\": \"bad\"}\n");
  const std::string message =
      error_of([&] { open_tokenized_jsonl(path, Split::kTrain, 1, encoder, no_cache()); });
  EXPECT_NE(message.find(path.string() + " line 3 could not be tokenised"), std::string::npos) << message;
  // zerotrain's own errors keep their type: a ConfigError stays one.
  encoder.encode = [](std::string_view) -> std::vector<int32_t> { throw ConfigError("the tokenizer is broken"); };
  EXPECT_NE(error_of<ConfigError>([&] { pack_documents({{.prompt = "", .text = "x"}}, encoder, "mem"); })
                .find("the tokenizer is broken"),
            std::string::npos);
}

// --- the JSONL reader -----------------------------------------------------------------------

TEST_F(Tokenized, MalformedLinesNameTheFileTheLineAndTheFix) {
  struct Case {
    std::string line, expected, fix;
  };
  const std::vector<Case> cases = {
      {"{\"txt\": \"a\"}", "has neither \"text\" nor \"prompt\" and \"completion\" (its keys: \"txt\")",
       "\"text\" string"},
      {"{\"prompt\": \"a\"}", "has \"prompt\" but no \"completion\"", "\"completion\" strings"},
      {"{\"completion\": \"a\"}", "has \"completion\" but no \"prompt\"", "\"prompt\" and"},
      {"{\"text\": 3}", "\"text\" is a number, not a string", "\"text\" string"},
      {"{\"prompt\": \"a\", \"completion\": null}", "\"completion\" is null, not a string", "strings"},
      {"{\"text\": \"a\", \"prompt\": \"b\", \"completion\": \"c\"}", "has both \"text\" and \"prompt\"", "not both"},
      {"[\"text\", \"a\"]", "is an array, not an object", "JSON object"},
      {"\"just a string\"", "is a string, not an object", "JSON object"},
      {"{\"text\": \"a\"", "is not valid JSON", "one object per line"},
      {"{\"text\": \"caf\xE9\"}", "is not valid JSON", "re-encode it"},
      {"{\"text\": \"a\", \"text\": \"b\"}", "duplicate keys", "remove the extra"},
      {"{\"messages\": []}", "has neither", "chat template"},
  };
  for (const Case& c : cases) {
    const fs::path path = write("bad.jsonl", "{\"text\": \"ok\"}\n\n" + c.line + "\n{\"text\": \"ok\"}\n");
    const std::string message = error_of([&] { read_jsonl(path, [](Document&&) {}); });
    EXPECT_NE(message.find(path.string() + " line 3"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.line << "\n" << message;
    EXPECT_NE(message.find(c.fix), std::string::npos) << c.line << "\n" << message;
  }
}

TEST_F(Tokenized, BlankLinesBomAndCrlfAreAccepted) {
  const fs::path path = write("docs.jsonl",
                              "\xEF\xBB\xBF{\"text\": \"a\"}\r\n"
                              "\r\n   \t\n\n"
                              "{\"prompt\": \"p\", \"completion\": \"\xC3\xA9\"}\r\n"
                              "{\"text\": \"last, no newline\"}");
  std::vector<Document> documents;
  EXPECT_EQ(read_jsonl(path, [&](Document&& d) { documents.push_back(std::move(d)); }), 3);
  ASSERT_EQ(documents.size(), 3u);
  EXPECT_EQ(documents[0].prompt, "");
  EXPECT_EQ(documents[0].text, "a");
  EXPECT_EQ(documents[1].prompt, "p");
  EXPECT_EQ(documents[1].text, "\xC3\xA9");
  EXPECT_EQ(documents[2].text, "last, no newline");
  // A BOM starting a later line (files concatenated) is skipped as well: the JSON parser does.
  const fs::path late = write("late.jsonl", "{\"text\": \"a\"}\n\xEF\xBB\xBF{\"text\": \"b\"}\n");
  EXPECT_EQ(read_jsonl(late, [](Document&&) {}), 2);
}

TEST_F(Tokenized, LinesAcrossTheReadersBlocksAreWhole) {
  // 2.5 MB of short lines, then one line of 3 MB: lines straddle the reader's 1 MiB blocks.
  std::string lines;
  for (int i = 0; i < 25000; ++i) lines += "{\"text\": \"line " + std::to_string(i) + std::string(70, '.') + "\"}\n";
  const std::string long_text(3 << 20, 'z');
  lines += "{\"prompt\": \"p\", \"completion\": \"" + long_text + "\"}\n";
  const fs::path path = write("big.jsonl", lines);
  int64_t seen = 0;
  bool all_equal = true;
  read_jsonl(path, [&](Document&& d) {
    const std::string expected =
        seen < 25000 ? "line " + std::to_string(seen) + std::string(70, '.') : long_text;
    all_equal = all_equal && d.text == expected;
    ++seen;
  });
  EXPECT_EQ(seen, 25001);
  EXPECT_TRUE(all_equal);
}

TEST_F(Tokenized, AFileOfNoDocumentsIsAnError) {
  for (const std::string& content : {std::string(), std::string("\n  \n\n")}) {
    const fs::path path = write("empty.jsonl", content);
    const std::string message =
        error_of([&] { open_tokenized_jsonl(path, Split::kTrain, 4, toy_.encoder(), no_cache()); });
    EXPECT_NE(message.find("holds no documents"), std::string::npos) << message;
  }
}

TEST_F(Tokenized, ALineLongerThanTheLimitStopsThereOnAOneGigabyteSparseFile) {
  const fs::path path = dir_ / "huge.jsonl";
  { std::ofstream touch(path); }
  fs::resize_file(path, int64_t{1} << 30);   // one line of NUL bytes, no block on disk
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { read_jsonl(path, [](Document&&) {}); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(message.find(path.string() + " line 1 is longer than the limit of 268435456 bytes (256 MiB)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("bytes read without a newline"), std::string::npos) << message;
  EXPECT_NE(message.find("raise max_line_bytes"), std::string::npos) << message;
  EXPECT_LT(seconds, 5.0) << "the reader must stop at the limit, not read the whole gigabyte";
  // A smaller limit, and a line that fits it exactly.
  const fs::path small = write("small.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"abcdef\"}\n");
  EXPECT_EQ(read_jsonl(small, [](Document&&) {}, {.max_line_bytes = 18}), 2);
  const std::string message2 = error_of([&] { read_jsonl(small, [](Document&&) {}, {.max_line_bytes = 17}); });
  EXPECT_NE(message2.find("line 2 is longer than the limit of 17 bytes: 18 bytes read"), std::string::npos)
      << message2;
}

// --- splits ---------------------------------------------------------------------------------

TEST_F(Tokenized, EvalIsTheLastTenthOfTheDocuments) {
  const fs::path path = numbered("docs.jsonl", 25);   // "d0".."d24": 3 or 4 tokens each with eos
  auto train = open_tokenized_jsonl(path, Split::kTrain, 2, toy_.encoder(), no_cache());
  auto eval = open_tokenized_jsonl(path, Split::kEval, 2, toy_.encoder(), no_cache());
  // 25 documents: eval the last 2 (d23, d24: 8 tokens), train the first 23 (10*3 + 13*4 = 82).
  EXPECT_EQ(train->tokens(), 82);
  EXPECT_EQ(eval->tokens(), 8);
  EXPECT_EQ(eval->size(), 3);   // (8 - 1) / 2
  const Batch first = eval->get({0, 1, 2});
  EXPECT_EQ(row(first.inputs, 0), ids("d2"));
  EXPECT_EQ(row(first.inputs, 1), (std::vector<int64_t>{id('3'), kEos}));
  EXPECT_EQ(row(first.targets, 2), (std::vector<int64_t>{id('2'), id('4')}));
  EXPECT_NE(eval->info().description.find("jsonl docs.jsonl eval (2 documents, 8 tokens: 3 blocks of 2"),
            std::string::npos)
      << eval->info().description;
  // The train split ends with d22 (positions 78..81): its last sample reads 78..80, no eval token.
  ASSERT_EQ(train->size(), 40);   // (82 - 1) / 2
  const Batch last = train->get({39});
  EXPECT_EQ(row(last.inputs, 0), ids("d2"));
  EXPECT_EQ(row(last.targets, 0), ids("22"));

  const fs::path few = numbered("few.jsonl", 9);
  EXPECT_EQ(open_tokenized_jsonl(few, Split::kTrain, 2, toy_.encoder(), no_cache())->tokens(), 27);
  const std::string message =
      error_of([&] { open_tokenized_jsonl(few, Split::kEval, 2, toy_.encoder(), no_cache()); });
  EXPECT_NE(message.find(few.string() + " has 9 documents"), std::string::npos) << message;
  EXPECT_NE(message.find("at least 10"), std::string::npos) << message;
}

TEST_F(Tokenized, ASplitTooShortForABlockNamesTheFileTokensAndBlockSize) {
  const fs::path path = numbered("docs.jsonl", 10);   // 30 tokens; eval: d9, 3 tokens
  const std::string message =
      error_of([&] { open_tokenized_jsonl(path, Split::kEval, 4, toy_.encoder(), no_cache()); });
  EXPECT_NE(message.find(path.string() + " (10 documents, 30 tokens): its eval split (the last 1 document, 3 tokens) "
                                         "is too short for one block of 4 tokens, which needs 5 tokens; use a "
                                         "block size of at most 2"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of([&] { open_tokenized_jsonl(path, Split::kTrain, 27, toy_.encoder(), no_cache()); })
                .find("train split (the first 9 documents, 27 tokens) is too short for one block of 27"),
            std::string::npos);
}

TEST_F(Tokenized, ATextFileThatIsNotUtf8IsRefusedNotReplaced) {
  const fs::path path = write("latin1.txt", std::string("caf\xE9 au lait, ") + std::string(64, 'x'));
  const std::string message =
      error_of([&] { open_tokenized_text(path, Split::kTrain, 4, toy_.encoder(), no_cache()); });
  EXPECT_NE(message.find("is not valid UTF-8; re-encode it (iconv"), std::string::npos) << message;
  EXPECT_EQ(toy_.calls->load(), 0);
}

TEST_F(Tokenized, TextFileIsOneDocumentSplitByTokens) {
  std::string text = "\xEF\xBB\xBF";
  for (int i = 0; i < 48; ++i) text += static_cast<char>('a' + i % 26);
  const fs::path path = write("corpus.txt", text);
  // Stream: BOS + 48 letters + EOS = 50 tokens; eval the last 5.
  auto train = open_tokenized_text(path, Split::kTrain, 4, toy_.encoder(true), no_cache());
  auto eval = open_tokenized_text(path, Split::kEval, 4, toy_.encoder(true), no_cache());
  EXPECT_EQ(train->tokens(), 45);
  EXPECT_EQ(eval->tokens(), 5);
  EXPECT_EQ(eval->size(), 1);
  const Batch batch = eval->get({0});
  EXPECT_EQ(row(batch.inputs, 0), ids("stuv"));   // positions 45..48: letters 44..47
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int64_t>{id('t'), id('u'), id('v'), kEos}));
  EXPECT_EQ(row(train->get({0}).inputs, 0), (std::vector<int64_t>{kBos, id('a'), id('b'), id('c')}));
  EXPECT_EQ(row(train->get({0}).targets, 0), ids("abcd"));
  EXPECT_EQ(eval->info().description, "text corpus.txt eval (5 tokens: 1 block of 4, 0% of targets masked)");
  const std::string message =
      error_of([&] { open_tokenized_text(path, Split::kEval, 5, toy_.encoder(true), no_cache()); });
  EXPECT_NE(message.find(path.string() + " (50 tokens): its eval split (the last 10% of the tokens, 5 tokens)"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of([&] { open_tokenized_text(write("empty.txt", ""), Split::kTrain, 4, toy_.encoder(), no_cache()); })
                .find("is empty"),
            std::string::npos);
}

// --- the cache ------------------------------------------------------------------------------

fs::path only_cache_file(const fs::path& source) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(source.string() + kCacheFolderSuffix)) {
    if (entry.path().extension() != ".lock") files.push_back(entry.path());   // the builders' turn-taking
  }
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files.front();
}

TEST_F(Tokenized, TheSecondOpenMapsTheCacheWithoutEncoding) {
  const fs::path path = numbered("docs.jsonl", 30);
  const TextEncoder encoder = toy_.encoder();
  auto first = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
  EXPECT_EQ(first->cache_use(), CacheUse::kWritten);
  EXPECT_EQ(toy_.calls->load(), 30);
  const fs::path file = only_cache_file(path);
  EXPECT_EQ(file.extension(), ".bin");
  EXPECT_EQ(file.stem().string().size(), 16u);

  *toy_.calls = 0;
  auto second = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
  auto eval = open_tokenized_jsonl(path, Split::kEval, 4, encoder);
  EXPECT_EQ(second->cache_use(), CacheUse::kRead);
  EXPECT_EQ(eval->cache_use(), CacheUse::kRead);
  EXPECT_EQ(toy_.calls->load(), 0);
  std::vector<int64_t> all(static_cast<size_t>(first->size()));
  for (int64_t i = 0; i < first->size(); ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_TRUE(at::equal(first->get(all).inputs, second->get(all).inputs));
  EXPECT_TRUE(at::equal(first->get(all).targets, second->get(all).targets));
  EXPECT_EQ(first->info().description, second->info().description);
}

// The Trainer's train and eval splits come from one read of the file: uncached, each document
// is encoded once, not once for each split; and they are the splits opened one by one.
TEST_F(Tokenized, BothSplitsAtOnceEncodeEachDocumentOnce) {
  const fs::path path = numbered("docs.jsonl", 25);
  const TokenizedSplits both = open_tokenized_splits(path, CorpusKind::kJsonl, 2, toy_.encoder(), true, no_cache());
  EXPECT_EQ(toy_.calls->load(), 25);
  auto train = open_tokenized_jsonl(path, Split::kTrain, 2, toy_.encoder(), no_cache());
  auto eval = open_tokenized_jsonl(path, Split::kEval, 2, toy_.encoder(), no_cache());
  for (const auto& [got, want] : {std::pair{both.train, train}, std::pair{both.eval, eval}}) {
    ASSERT_TRUE(got);
    ASSERT_EQ(got->size(), want->size());
    std::vector<int64_t> all(static_cast<size_t>(got->size()));
    for (int64_t i = 0; i < got->size(); ++i) all[static_cast<size_t>(i)] = i;
    EXPECT_TRUE(at::equal(got->get(all).inputs, want->get(all).inputs));
    EXPECT_TRUE(at::equal(got->get(all).targets, want->get(all).targets));
    EXPECT_EQ(got->info().description, want->info().description);
  }
  // Without eval, a file too small to hold out documents trains: the eval split is not made.
  const fs::path few = numbered("few.jsonl", 9);
  const TokenizedSplits train_only = open_tokenized_splits(few, CorpusKind::kJsonl, 2, toy_.encoder(), false,
                                                           no_cache());
  EXPECT_EQ(train_only.train->tokens(), 27);
  EXPECT_FALSE(train_only.eval);
  const std::string message = error_of([&] {
    open_tokenized_splits(few, CorpusKind::kJsonl, 2, toy_.encoder(), true, no_cache());
  });
  EXPECT_NE(message.find("at least 10"), std::string::npos) << message;
}

TEST_F(Tokenized, AChangedSourceOrTokenizerIsANewCacheEntry) {
  const fs::path path = numbered("docs.jsonl", 12);
  const TextEncoder encoder = toy_.encoder();
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kWritten);
  // The same size, one byte changed: the content's checksum is in the key.
  std::string lines;
  for (int i = 0; i < 12; ++i) lines += "{\"text\": \"" + std::string(i == 5 ? "e" : "d") + std::to_string(i) + "\"}\n";
  write("docs.jsonl", lines);
  *toy_.calls = 0;
  auto changed = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
  EXPECT_EQ(changed->cache_use(), CacheUse::kWritten);
  EXPECT_EQ(toy_.calls->load(), 12);
  EXPECT_EQ(row(changed->get({3}).inputs, 0)[3], id('e'));   // "d4" EOS "e5": position 15 is 'e'
  *toy_.calls = 0;
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, toy_.encoder(false, "toy-bytes-2"))->cache_use(),
            CacheUse::kWritten);
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, toy_.encoder(true))->cache_use(), CacheUse::kWritten);
  EXPECT_EQ(toy_.calls->load(), 24);
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kRead);
  // A text corpus of the same file is another entry: its documents differ.
  EXPECT_EQ(open_tokenized_text(path, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kWritten);
}

TEST_F(Tokenized, ADamagedCacheIsRebuiltNotTrusted) {
  const fs::path path = numbered("docs.jsonl", 20);
  const TextEncoder encoder = toy_.encoder();
  auto good = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
  const fs::path file = only_cache_file(path);
  const auto size = static_cast<int64_t>(fs::file_size(file));
  std::vector<int64_t> all(static_cast<size_t>(good->size()));
  for (int64_t i = 0; i < good->size(); ++i) all[static_cast<size_t>(i)] = i;

  const std::vector<std::function<void()>> damages = {
      [&] {   // one token's byte flipped
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(size - 30);
        f.put('\x7f');
      },
      [&] { fs::resize_file(file, size - 1); },
      [&] { fs::resize_file(file, 10); },
      [&] {   // another format version
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8);
        f.put('\x09');
      },
  };
  for (size_t d = 0; d < damages.size(); ++d) {
    damages[d]();
    *toy_.calls = 0;
    ::testing::internal::CaptureStderr();
    auto rebuilt = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rebuilt->cache_use(), CacheUse::kRebuilt) << d;
    EXPECT_EQ(toy_.calls->load(), 20) << d;
    if (log::enabled(log::Level::kWarn)) {
      EXPECT_NE(log.find("it is ignored and rebuilt"), std::string::npos) << d << ": " << log;
    }
    EXPECT_TRUE(at::equal(good->get(all).targets, rebuilt->get(all).targets)) << d;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(file)), size) << d;
    EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kRead) << d;
  }
}

TEST_F(Tokenized, AnUnwritableCacheFolderTrainsWithoutACache) {
  const fs::path path = numbered("docs.jsonl", 12);
  const TextEncoder encoder = toy_.encoder();
  // The folder's name taken by a file: it cannot be created, whoever runs the test.
  write("docs.jsonl.zt-tokens", "not a folder");
  ::testing::internal::CaptureStderr();
  auto dataset = open_tokenized_jsonl(path, Split::kTrain, 4, encoder);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(dataset->cache_use(), CacheUse::kNotWritten);
  if (log::enabled(log::Level::kInfo)) {   // ZEROTRAIN_LOG_LEVEL may hide it
    EXPECT_NE(log.find("training without one"), std::string::npos) << log;
    EXPECT_NE(log.find("[info]"), std::string::npos) << log;
  }
  EXPECT_EQ(dataset->size(), (36 - 1) / 4);
}

TEST_F(Tokenized, AReadOnlyFolderTrainsWithoutACache) {
  const fs::path path = numbered("docs.jsonl", 12);
  const TextEncoder encoder = toy_.encoder();
  const fs::path locked = dir_ / "locked";
  fs::create_directories(locked);
  const fs::path inside = locked / "docs.jsonl";
  fs::copy_file(path, inside);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
  if (::access(locked.c_str(), W_OK) == 0) GTEST_SKIP() << "permissions do not bind here (root)";
  EXPECT_EQ(open_tokenized_jsonl(inside, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kNotWritten);
}

TEST_F(Tokenized, RanksBuildingTheSameCacheAtOnceAllSucceed) {
  const fs::path path = numbered("docs.jsonl", 40);
  const TextEncoder encoder = toy_.encoder();
  std::vector<std::shared_ptr<const TokenizedDataset>> results(6);
  std::vector<std::thread> ranks;
  std::atomic<int> failures{0};
  for (size_t r = 0; r < results.size(); ++r) {
    ranks.emplace_back([&, r] {
      try {
        results[r] = open_tokenized_jsonl(path, Split::kTrain, 4, encoder, {.threads = 1});
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (const auto& result : results) {
    EXPECT_TRUE(at::equal(result->get({0, 1, 2}).inputs, results[0]->get({0, 1, 2}).inputs));
  }
  only_cache_file(path);   // one entry, no temporary file left behind
  // They took turns: one tokenised the 40 documents, the other five read what it wrote.
  EXPECT_EQ(toy_.calls->load(), 40);
  int built = 0;
  for (const auto& result : results) built += result->cache_use() == CacheUse::kWritten ? 1 : 0;
  EXPECT_EQ(built, 1);
  EXPECT_EQ(open_tokenized_jsonl(path, Split::kTrain, 4, encoder)->cache_use(), CacheUse::kRead);
}

}  // namespace
}  // namespace zerotrain::data::tokenized
