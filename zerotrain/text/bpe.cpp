#include "zerotrain/text/bpe.h"

#include "zerotrain/text/utf8.h"

#include <algorithm>
#include <cstdio>

namespace zerotrain::text {
namespace {

// A merge as tokenizer.json writes it: ["a", "b"] (tokenizers 0.20 on) or "a b" (before).
std::pair<std::string, std::string> read_merge(const JsonField& entry) {
  const Json& json = entry.json();
  if (json.is_array()) {
    if (json.size() != 2 || !json[0].is_string() || !json[1].is_string()) {
      entry.fail("expected a pair of tokens [\"a\", \"b\"], got " + json_excerpt(json));
    }
    return {json[0].get<std::string>(), json[1].get<std::string>()};
  }
  if (json.is_string()) {
    const std::string& text = json.get_ref<const std::string&>();
    const size_t space = text.find(' ');
    if (space == std::string::npos) entry.fail("expected two tokens separated by a space, got " + json_excerpt(json));
    return {text.substr(0, space), text.substr(space + 1)};
  }
  entry.fail("expected a pair of tokens [\"a\", \"b\"] or \"a b\", got " + json_excerpt(json));
}

}  // namespace

Bpe::Bpe(const JsonField& model) {
  byte_ids_.fill(-1);
  if (model.has("dropout")) {
    model["dropout"].fail("BPE dropout samples the merges at random, so no two encodings need agree; set it to null");
  }
  const JsonField vocab = model["vocab"];
  const auto& entries = vocab.object();
  vocab_.reserve(entries.size());
  int32_t max_id = -1;
  for (const auto& [token, id_json] : entries) {
    const JsonField id_field(id_json, vocab.path() + "[\"" + token + "\"]", model.origin());
    const int64_t id = id_field.integer();
    if (id < 0 || id > INT32_MAX) id_field.fail("expected an id from 0 to 2^31-1, got " + std::to_string(id));
    vocab_.emplace(token, static_cast<int32_t>(id));
    if (id > max_id) max_id = static_cast<int32_t>(id);
  }
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab_) tokens_[static_cast<size_t>(id)] = token;

  if (model.has("continuing_subword_prefix")) continuing_subword_prefix_ = model["continuing_subword_prefix"].string();
  if (model.has("end_of_word_suffix")) end_of_word_suffix_ = model["end_of_word_suffix"].string();
  fuse_unk_ = model.has("fuse_unk") && model["fuse_unk"].boolean();
  byte_fallback_ = model.has("byte_fallback") && model["byte_fallback"].boolean();
  ignore_merges_ = model.has("ignore_merges") && model["ignore_merges"].boolean();
  if (model.has("unk_token")) {
    const JsonField unk = model["unk_token"];
    const auto it = vocab_.find(unk.string());
    if (it == vocab_.end()) unk.fail("the unknown token \"" + unk.string() + "\" is not in model.vocab");
    unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (const auto it = vocab_.find(std::string_view(name)); it != vocab_.end()) byte_ids_[b] = it->second;
  }

  char_ids_.reserve(1024);
  for (const auto& [token, id] : vocab_) {
    size_t at = 0;
    const char32_t c = token.empty() ? 0 : next_code_point(token, at);
    if (!token.empty() && at == token.size()) char_ids_.insert(c, id);
  }

  const JsonField merges = model["merges"];
  merges.array();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const JsonField entry = merges[rank];
    const auto [left, right] = read_merge(entry);
    const auto left_it = vocab_.find(left), right_it = vocab_.find(right);
    if (left_it == vocab_.end()) entry.fail("the token \"" + left + "\" is not in model.vocab");
    if (right_it == vocab_.end()) entry.fail("the token \"" + right + "\" is not in model.vocab");
    // With a continuing-subword prefix, "##b" joins "a" as "ab".
    const size_t prefix = continuing_subword_prefix_.size();
    const bool right_prefixed = prefix > 0 && right.compare(0, prefix, continuing_subword_prefix_) == 0;
    const std::string merged = left + (right_prefixed ? right.substr(prefix) : right);
    const auto merged_it = vocab_.find(merged);
    if (merged_it == vocab_.end()) entry.fail("the merged token \"" + merged + "\" is not in model.vocab");
    // A pair listed twice keeps its first (lowest) rank.
    merges_.insert(pair_key(left_it->second, right_it->second), Merge{static_cast<int32_t>(rank), merged_it->second});
  }
  cache_.reserve(kCacheWords);
}

Bpe::~Bpe() = default;

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || tokens_[static_cast<size_t>(id)].empty()) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  // Llama 3's ignore_merges: a word the vocabulary has whole is that one token.
  if (const auto it = ignore_merges_ ? vocab_.find(word) : vocab_.end(); it != vocab_.end()) {
    out.push_back(it->second);
  } else {
    merge_word(word, out);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheWords) {
      cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
    }
  }
}

// The initial symbols: one per character (its token, or its bytes' <0xNN> tokens, or the
// unknown token), as tokenizers' merge_word builds them.
void Bpe::add_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool unk_pending = false;
  std::string affixed;
  for (size_t at = 0; at < word.size();) {
    const size_t begin = at;
    at = std::min(word.size(), at + utf8_length(static_cast<unsigned char>(word[at])));
    std::string_view symbol = word.substr(begin, at - begin);
    const bool prefix = begin > 0 && !continuing_subword_prefix_.empty();
    const bool suffix = at == word.size() && !end_of_word_suffix_.empty();
    std::optional<int32_t> id;
    if (prefix || suffix) {
      affixed.assign(prefix ? continuing_subword_prefix_ : std::string());
      affixed.append(symbol);
      if (suffix) affixed.append(end_of_word_suffix_);
      symbol = affixed;
      if (const auto it = vocab_.find(symbol); it != vocab_.end()) id = it->second;
    } else {
      size_t after = 0;
      if (const int32_t* found = char_ids_.find(next_code_point(symbol, after))) id = *found;
    }
    if (id) {
      if (unk_pending) {
        ids.push_back(*unk_id_);
        unk_pending = false;
      }
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char b : symbol) all_bytes = all_bytes && byte_ids_[static_cast<unsigned char>(b)] >= 0;
      if (all_bytes) {
        // As tokenizers: the byte tokens go in without flushing a pending unknown token first.
        for (const char b : symbol) ids.push_back(byte_ids_[static_cast<unsigned char>(b)]);
        continue;
      }
    }
    if (!unk_id_) continue;   // no unknown token: tokenizers drops the character
    if (unk_pending && !fuse_unk_) ids.push_back(*unk_id_);
    unk_pending = true;
  }
  if (unk_pending) ids.push_back(*unk_id_);
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Scratch reused across calls: a word's merge allocates nothing once these have grown.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged_id;
    // The lowest rank first and, among equal ranks, the leftmost: tokenizers' order.
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  struct Scratch {
    std::vector<int32_t> ids, prev, next;
    std::vector<char> alive;
    std::vector<Candidate> queue;
  };
  thread_local Scratch scratch;
  std::vector<int32_t>& ids = scratch.ids;
  ids.clear();
  add_symbols(word, ids);
  const auto n = static_cast<int32_t>(ids.size());
  if (n <= 1) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // A doubly linked list over the symbols; a merged-away symbol is marked dead.
  std::vector<int32_t>& prev = scratch.prev;
  std::vector<int32_t>& next = scratch.next;
  std::vector<char>& alive = scratch.alive;
  prev.resize(static_cast<size_t>(n));
  next.resize(static_cast<size_t>(n));
  alive.assign(static_cast<size_t>(n), 1);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate>& queue = scratch.queue;   // a min-heap
  queue.clear();
  const auto push_pair = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    if (const Merge* merge = merges_.find(pair_key(ids[left], ids[right]))) {
      queue.push_back({merge->rank, left, merge->merged_id});
      std::push_heap(queue.begin(), queue.end(), std::greater<>());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>());
    const Candidate top = queue.back();
    queue.pop_back();
    const int32_t left = top.pos;
    if (!alive[left]) continue;
    const int32_t right = next[left];
    if (right < 0) continue;
    // Stale unless the pair there now still merges into the same token (tokenizers' test).
    const Merge* merge = merges_.find(pair_key(ids[left], ids[right]));
    if (merge == nullptr || merge->merged_id != top.merged_id) continue;
    ids[left] = top.merged_id;
    alive[right] = 0;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    if (prev[left] >= 0) push_pair(prev[left]);
    push_pair(left);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace zerotrain::text
