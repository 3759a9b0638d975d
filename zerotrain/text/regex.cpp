#include "zerotrain/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace zerotrain::text {
namespace {

// Two classes mean more in Oniguruma than in PCRE2 (with PCRE2_UCP), and the patterns are
// widened to Oniguruma's meaning when compiled:
// - \s: Oniguruma's is Unicode's White_Space property; PCRE2's leaves out U+0085 (NEXT LINE),
//   so `\s+(?!\S)` would split a text with U+0085 elsewhere than `tokenizers` does.
// - \w: Oniguruma's takes every Alphabetic character, mark and number and each connector
//   punctuation; PCRE2's only letters, numbers and '_'.
// Escapes and classes are tracked only as far as needed to tell where a \s or \w stands; the
// pattern itself is left to PCRE2.
std::string onig_classes(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      ++i;
      constexpr const char* kMoreWord = "\\p{Alphabetic}\\p{M}\\p{Pc}";
      if (next == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (next == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else if (next == 'w') {
        out += in_class ? std::string("\\w") + kMoreWord : std::string("[\\w") + kMoreWord + "]";
      } else if (next == 'W' && !in_class) {
        out += std::string("[^\\w") + kMoreWord + "]";
      } else {
        out += '\\';
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {   // [:alpha:]
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// One pair of offsets is all find_all reads; one block per thread serves every regex.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create(1, nullptr));
  return data.get();
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string& pattern) : compiled_(std::make_unique<Compiled>()) {
  const std::string widened = onig_classes(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(widened.data()), widened.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    throw std::invalid_argument(std::string(reinterpret_cast<const char*>(message)) + " (at offset " +
                                std::to_string(error_offset) + ")");
  }
  // Without JIT (a platform PCRE2 has no JIT for) the interpreter gives the same matches, slower.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view text, std::vector<RegexMatch>& out) const {
  pcre2_match_data* data = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t from = 0;
  while (from <= text.size()) {
    const int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), from, 0, data, nullptr)
                                  : pcre2_match(compiled_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK,
                                                data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error(std::string("regex match failed: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      out.push_back({begin, end});
      from = end;
      continue;
    }
    // An empty match: step over one whole character.
    if (begin >= text.size()) return;
    from = begin + 1;
    while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  }
}

std::string regex_quote(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace zerotrain::text
