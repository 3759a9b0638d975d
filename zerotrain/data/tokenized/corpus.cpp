#include "zerotrain/data/tokenized/corpus.h"

#include <string>
#include <string_view>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/data/tokenized/packing.h"
#include "zerotrain/text/utf8.h"

namespace zerotrain::data::tokenized {

const char* corpus_kind_name(CorpusKind kind) { return kind == CorpusKind::kJsonl ? "jsonl" : "text"; }

Corpus load_corpus(const std::filesystem::path& path, CorpusKind kind, const TextEncoder& encoder,
                   const TokenizedOptions& options) {
  check_encoder(encoder);
  const PackOptions pack_options{.threads = options.threads};
  auto build = [&]() -> TokenStream {
    Packer packer(encoder, path.string(), pack_options);
    if (kind == CorpusKind::kJsonl) {
      const int64_t documents = read_jsonl(path, [&](Document&& document) { packer.add(std::move(document)); },
                                           {.max_line_bytes = options.max_line_bytes});
      ZT_CHECK(documents > 0, IoError, path.string(),
               " holds no documents (it is empty or only blank lines); each line must be a JSON object with a "
               "\"text\" string, or with \"prompt\" and \"completion\" strings");
    } else {
      files::InputFile file(path, {.what = "text file"});
      std::string text = file.read_all();
      ZT_CHECK(!text.empty(), IoError, path.string(), " is empty; name a text file with the corpus to train on");
      if (std::string_view(text).starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
      // As a JSONL line is: refused, not silently replaced by U+FFFD.
      ZT_CHECK(text::is_valid_utf8(text), IoError, path.string(), " is not valid UTF-8; re-encode it "
               "(iconv -f <its encoding> -t UTF-8 FILE > FILE.utf8) and train on the result");
      packer.add(Document{.prompt = {}, .text = std::move(text)});
    }
    return packer.finish();
  };
  CachedStream cached = cached_stream(path, corpus_kind_name(kind), encoder, options.cache, build);
  return Corpus{.source = path, .kind = kind, .stream = std::move(cached.stream), .cache = cached.use};
}

}  // namespace zerotrain::data::tokenized
