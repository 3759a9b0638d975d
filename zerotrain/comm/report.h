// What this build's communication layer offers, for `zerotrain report`.
#pragma once

#include <string>
#include <vector>

namespace zerotrain::comm {

struct BackendReport {
  std::string name;                    // "gloo"
  std::string status;                  // "yes", "not built (...)", "compiled, untested (...)"
  std::vector<std::string> composed;   // what the Communicator builds from other collectives
};

std::vector<BackendReport> backend_reports();

}  // namespace zerotrain::comm
