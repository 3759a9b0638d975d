// zt_tokenize: zerotrain's tokenizer.json reader from the command line, for the parity test
// against the Python tokenizers package (tests/python/test_tokenizer_parity.py).
//
//   zt_tokenize DIR TEXTS.json
//
// TEXTS.json is a list; each entry is a string, or {"hex": "..."} for bytes that are not
// valid UTF-8. Prints {"ids": [...], "ids_special": [...], "decoded": [...]}: per text its ids
// without and with the post-processor's special tokens, and the decoded text of its ids.
// A zerotrain error prints its message and exits with its exit code.
#include "zerotrain/core/error.h"
#include "zerotrain/text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

namespace {

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: zt_tokenize DIR TEXTS.json\n";
    return 2;
  }
  try {
    const auto tokenizer = zerotrain::text::Tokenizer::from_folder(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) {
      std::cerr << argv[2] << ": cannot be read\n";
      return 2;
    }
    const nlohmann::json texts = nlohmann::json::parse(in);
    nlohmann::json ids = nlohmann::json::array(), ids_special = nlohmann::json::array(),
                   decoded = nlohmann::json::array();
    for (const auto& entry : texts) {
      const std::string text =
          entry.is_string() ? entry.get<std::string>() : from_hex(entry.at("hex").get<std::string>());
      const std::vector<int32_t> plain = tokenizer.encode(text, false);
      ids.push_back(plain);
      ids_special.push_back(tokenizer.encode(text, true));
      decoded.push_back(tokenizer.decode(plain, false));
    }
    nlohmann::json out = {{"ids", ids}, {"ids_special", ids_special}, {"decoded", decoded},
                          {"vocab_size", tokenizer.vocab_size()}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  } catch (const zerotrain::Error& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code();
  }
}
