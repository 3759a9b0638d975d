#include "zerotrain/text/pretokenizers.h"

#include "zerotrain/text/byte_level.h"
#include "zerotrain/text/normalizers.h"
#include "zerotrain/text/regex.h"
#include "zerotrain/text/split_behavior.h"

#include <stdexcept>

namespace zerotrain::text {
namespace {

// GPT-2's word pattern, which ByteLevel's use_regex applies.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Cuts each piece at `pattern`'s matches; the first sub-piece keeps the piece's at_start.
void split_pieces(std::vector<Piece>& pieces, const Regex& pattern, SplitBehavior behavior, bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 4);
  std::vector<RegexMatch> matches;
  for (Piece& piece : pieces) {
    matches.clear();
    pattern.find_all(piece.text, matches);
    for (const Span& span : split_spans(piece.text.size(), matches, behavior, invert)) {
      out.push_back({piece.text.substr(span.begin, span.end - span.begin), piece.at_start && span.begin == 0});
    }
  }
  pieces = std::move(out);
}

SplitBehavior read_behavior(const JsonField& field) {
  const std::string& name = field.string();
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  field.fail("\"" + name + "\" is not a split behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext, "
             "Contiguous)");
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<Piece>& pieces) const override { split_pieces(pieces, *pattern_, behavior_, invert_); }

 private:
  std::unique_ptr<Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), words_(use_regex ? std::make_unique<Regex>(kGpt2Pattern) : nullptr) {}
  void split(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& piece : pieces) {
        if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, 1, ' ');
      }
    }
    if (words_) split_pieces(pieces, *words_, SplitBehavior::kIsolated, false);
    std::string mapped;
    for (Piece& piece : pieces) {
      mapped.clear();
      append_byte_level(mapped, piece.text);
      piece.text.swap(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> words_;
};

// SentencePiece's spaces: each ' ' becomes the replacement ("▁"), which may be prepended, and
// the text may be cut before each replacement.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split),
        space_(" "), at_replacement_(regex_quote(replacement_)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (Piece& piece : pieces) {
      piece.text = replace_all(space_, piece.text, replacement_);
      const bool starts_with = piece.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts_with && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_start))) {
        piece.text.insert(0, replacement_);
      }
    }
    if (split_) split_pieces(pieces, at_replacement_, SplitBehavior::kMergedWithNext, false);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  Regex space_;
  Regex at_replacement_;
};

std::unique_ptr<PreTokenizer> make_metaspace(const JsonField& field) {
  using Prepend = MetaspacePreTokenizer::Prepend;
  Prepend prepend = Prepend::kAlways;
  if (field.has("prepend_scheme")) {
    const JsonField scheme = field["prepend_scheme"];
    const std::string& name = scheme.string();
    if (name == "always") {
      prepend = Prepend::kAlways;
    } else if (name == "first") {
      prepend = Prepend::kFirst;
    } else if (name == "never") {
      prepend = Prepend::kNever;
    } else {
      scheme.fail("\"" + name + "\" is not a prepend scheme (always, first, never)");
    }
  } else if (field.has("add_prefix_space")) {   // tokenizer.json before prepend_scheme existed
    prepend = field["add_prefix_space"].boolean() ? Prepend::kAlways : Prepend::kNever;
  }
  const bool split = field.has("split") ? field["split"].boolean() : true;
  return std::make_unique<MetaspacePreTokenizer>(field["replacement"].string(), prepend, split);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& field) {
  if (field.json().is_null()) return nullptr;
  const std::string& type = field["type"].string();
  if (type == "Sequence") {
    const JsonField list = field["pretokenizers"];
    list.array();
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_pre_tokenizer(list[i])) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "ByteLevel") {
    const bool add_prefix_space = field.has("add_prefix_space") && field["add_prefix_space"].boolean();
    const bool use_regex = !field.has("use_regex") || field["use_regex"].boolean();
    return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex);
  }
  if (type == "Split") {
    const bool invert = field.has("invert") && field["invert"].boolean();
    return std::make_unique<SplitPreTokenizer>(make_pattern(field["pattern"]), read_behavior(field["behavior"]),
                                               invert);
  }
  if (type == "Metaspace") return make_metaspace(field);
  if (type == "Digits") {
    const bool individual = field.has("individual_digits") && field["individual_digits"].boolean();
    return std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(individual ? R"(\p{N})" : R"(\p{N}+)"),
                                               SplitBehavior::kIsolated, false);
  }
  if (type == "Whitespace") {
    // tokenizers' \w+|[^\w\s]+ in Rust's regex, whose \w is Unicode's word class (letters
    // with the other Alphabetic characters, marks, decimal digits, connectors, ZWNJ/ZWJ): PCRE2's
    // \w leaves out the marks, so the class is spelled out.
    constexpr const char* kWord = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
    constexpr const char* kNotWordOrSpace = R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s])";
    return std::make_unique<SplitPreTokenizer>(
        std::make_unique<Regex>(std::string(kWord) + "+|" + kNotWordOrSpace + "+"), SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(R"(\s+)"), SplitBehavior::kRemoved, false);
  }
  field["type"].fail("pre-tokenizer type \"" + type +
                     "\" is not supported (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, "
                     "WhitespaceSplit, Sequence); use the tokenizer with the Python tokenizers package instead");
}

}  // namespace zerotrain::text
