#include "zerotrain/text/tokenizer.h"

#include "zerotrain/core/error.h"
#include "zerotrain/text/added_tokens.h"
#include "zerotrain/text/bpe.h"
#include "zerotrain/text/decoders.h"
#include "zerotrain/text/json_field.h"
#include "zerotrain/text/normalizers.h"
#include "zerotrain/text/post_processor.h"
#include "zerotrain/text/pretokenizers.h"
#include "zerotrain/text/utf8.h"

#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace zerotrain::text {
namespace {

// Part of every fingerprint, so that token caches made by an older reader are not reused once
// the ids it gives could differ: raise it with every change to what encode() returns.
constexpr const char* kCodeVersion = "zerotrain-tokenizer-1";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detail::str(path.string(), ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(detail::str(path.string(), ": read failed"));
  return text.str();
}

// tokenizer.json nests a few levels; a file nested thousands deep is not one, and would
// exhaust the stack of the recursive code that prints and frees a JSON value.
constexpr int kMaxJsonDepth = 64;

void check_depth(std::string_view text, const std::string& origin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw ConfigError(detail::str(origin, ": nested more than ", kMaxJsonDepth,
                                      " levels deep; a tokenizer.json is a few levels deep"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

Json parse(std::string_view text, const std::string& origin) {
  check_depth(text, origin);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    throw ConfigError(detail::str(origin, ": not valid JSON (", e.what(),
                                  "); a tokenizer.json is written by the tokenizers package's Tokenizer.save"));
  }
}

std::string hex_digest(std::string_view bytes) {
  const XXH128_hash_t hash = XXH3_128bits(bytes.data(), bytes.size());
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return text;
}

// tokenizer_config.json's "eos_token"/"bos_token": a string, or an object with "content".
std::optional<std::string> config_token_name(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const Json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  AddedTokens added;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::optional<int32_t> eos, bos;
  std::string fingerprint;
  int64_t vocab_size = 0;

  // A stretch of normalized text with no added token in it: pre-tokenized, then modelled.
  void encode_words(std::string text, bool at_start, std::vector<int32_t>& ids) const {
    std::vector<Piece> pieces;
    pieces.push_back({std::move(text), at_start});
    if (pre_tokenizer) pre_tokenizer->split(pieces);
    for (const Piece& piece : pieces) model->tokenize(piece.text, ids);
  }

  void encode_segment(std::string_view raw, bool at_start, std::vector<int32_t>& ids) const {
    std::string text(raw);
    if (normalizer) normalizer->normalize(text);
    if (text.empty()) return;
    if (!added.has_normalized()) {
      encode_words(std::move(text), at_start, ids);
      return;
    }
    for (const Segment& s : added.split(text, /*raw_text=*/false)) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        encode_words(text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, ids);
      }
    }
  }

  std::optional<int32_t> token_to_id(std::string_view token) const {
    if (const AddedToken* added_token = added.by_content(token)) return added_token->id;
    return model->token_to_id(token);
  }

  std::optional<int32_t> named_token(const std::optional<std::string>& configured,
                                     std::initializer_list<const char*> usual) const {
    if (configured) return token_to_id(*configured);
    for (const char* name : usual) {
      if (auto id = token_to_id(name)) return id;
    }
    return std::nullopt;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

namespace {

std::unique_ptr<Tokenizer::Impl> build(std::string_view json_text, const std::string& origin, const Json* config) {
  const Json json = parse(json_text, origin);
  const JsonField top(json, "", origin);
  top.object();
  auto impl = std::make_unique<Tokenizer::Impl>();
  for (const char* unsupported : {"truncation", "padding"}) {
    if (top.has(unsupported)) {
      top[unsupported].fail("set in the file, and it would change the ids encode gives; zerotrain cuts and pads "
                            "its own sequences, so set it to null (tokenizer.no_truncation()/no_padding() and save)");
    }
  }
  const JsonField model = top["model"];
  // tokenizers reads a model without "type" by its fields; a BPE is the one with merges.
  const std::string type = model.has("type") || !model.has("merges") ? model["type"].string() : "BPE";
  if (type != "BPE") {
    model["type"].fail("model type \"" + type + "\" is not supported: zerotrain reads BPE tokenizers (GPT-2, Llama, "
                       "Qwen, Mistral); use the tokenizer with the Python tokenizers package instead");
  }
  impl->model = std::make_unique<Bpe>(model);
  static const Json null_json;
  const auto optional_field = [&](const char* key) {
    return top.has(key) ? top[key] : JsonField(null_json, key, origin);
  };
  impl->normalizer = make_normalizer(optional_field("normalizer"));
  impl->pre_tokenizer = make_pre_tokenizer(optional_field("pre_tokenizer"));
  impl->post_processor = make_post_processor(optional_field("post_processor"));
  impl->decoder = make_decoder(optional_field("decoder"));
  impl->added = AddedTokens(optional_field("added_tokens"), impl->normalizer.get());

  int64_t max_id = impl->model->max_id();
  for (const AddedToken& token : impl->added.tokens()) max_id = std::max<int64_t>(max_id, token.id);
  impl->vocab_size = max_id + 1;

  const Json no_config;
  const Json& cfg = config != nullptr ? *config : no_config;
  for (const char* key : {"eos_token", "bos_token"}) {
    const std::optional<std::string> named = config_token_name(cfg, key);
    if (named && !impl->token_to_id(*named)) {
      throw ConfigError(detail::str("tokenizer_config.json names ", key, " \"", *named, "\", which ", origin,
                                    " does not have; name a token of its vocabulary or added_tokens, or save the "
                                    "tokenizer and its config together (tokenizer.save_pretrained)"));
    }
  }
  impl->eos = impl->named_token(config_token_name(cfg, "eos_token"), {"<|endoftext|>", "</s>", "<|end_of_text|>"});
  impl->bos = impl->named_token(config_token_name(cfg, "bos_token"), {"<s>", "<|begin_of_text|>"});
  return impl;
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& origin) {
  auto impl = build(json, origin, nullptr);
  impl->fingerprint = hex_digest(std::string(kCodeVersion) + '\0' + std::string(json));
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_folder(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw IoError(detail::str(dir.string(), ": no tokenizer.json; a Hugging Face model folder has one "
                              "(tokenizer.save_pretrained(DIR) writes it)"));
  }
  const std::string text = read_file(file);
  const std::filesystem::path config_file = dir / "tokenizer_config.json";
  std::string config_text;
  Json config;
  if (std::filesystem::is_regular_file(config_file, ec)) {
    config_text = read_file(config_file);
    config = parse(config_text, config_file.string());
  }
  auto impl = build(text, file.string(), config.is_null() ? nullptr : &config);
  impl->fingerprint = hex_digest(std::string(kCodeVersion) + '\0' + text + '\0' + config_text);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const Impl& impl = *impl_;
  const std::string text = is_valid_utf8(input) ? std::string(input) : to_valid_utf8(input);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Segment& s : impl.added.split(text, /*raw_text=*/true)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      impl.encode_segment(std::string_view(text).substr(s.begin, s.end - s.begin), s.begin == 0, ids);
    }
  }
  if (add_special_tokens && impl.post_processor) impl.post_processor->add_special_tokens(ids);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = nullptr;
    if (const AddedToken* added = impl.added.by_id(id)) {
      token = &added->decoded;
    } else {
      token = impl.model->id_to_token(id);
    }
    if (token == nullptr) continue;   // an id of no token: tokenizers leaves it out
    if (skip_special_tokens) {
      const AddedToken* named = impl.added.by_content(*token);
      if (named != nullptr && named->special) continue;
    }
    tokens.push_back(*token);
  }
  std::string out;
  if (impl.decoder) {
    for (const std::string& piece : impl.decoder->decode_chain(std::move(tokens))) out += piece;
    return out;
  }
  for (size_t i = 0; i < tokens.size(); ++i) out += (i == 0 ? "" : " ") + tokens[i];
  return out;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
const std::string& Tokenizer::fingerprint() const { return impl_->fingerprint; }

}  // namespace zerotrain::text
