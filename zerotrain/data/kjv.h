// The King James Bible (4.3 MB of English) as a text dataset, from the Debian packages
// bible-kjv-text (the text, /usr/lib/bible.data) and bible-kjv (the `bible` program that
// prints it): `bible -l79 -p DATA_DIR Gen1:1-Rev22:21`. The fixed line width keeps the text
// (and so every block) the same whatever the terminal's COLUMNS.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zerotrain/data/text.h"

namespace zerotrain::data {

struct KjvOptions {
  std::string program = "bible";       // looked up in PATH when it has no '/'
  std::string data_dir = "/usr/lib";   // holds bible.data (package bible-kjv-text)
};

// The whole text. A missing program or data file, or a program that fails, is an IoError
// that names the package and the fix (apt-get install bible-kjv-text bible-kjv, or
// bash scripts/setup.sh).
std::string kjv_text(const KjvOptions& options = {});

std::shared_ptr<const TextDataset> load_kjv(Split split, int64_t block_size, const KjvOptions& options = {});

}  // namespace zerotrain::data
