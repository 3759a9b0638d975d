// libFuzzer target for the pickle reader of the DeepSpeed import
// (zerotrain/checkpoint/deepspeed/pickle.h): bytes -> unpickle -> every value visited
// through the readers the import uses (find, at, as_int, as_items, describe).
//
// A zerotrain::Error (CheckpointError) is the reader's answer to bad input, so it is caught.
// Anything else escapes on purpose: another exception reaches std::terminate, and libFuzzer
// reports the abort like a crash or an ASan/UBSan report (docs/fuzzing.md).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "zerotrain/checkpoint/deepspeed/pickle.h"
#include "zerotrain/core/error.h"

namespace {

namespace pk = zerotrain::checkpoint::pickle;

// Walks the values as the import would, each once (through the memo a pickle can make a
// list that holds itself, or a value reached by many paths).
void visit(const pk::Value& v, std::set<const pk::Value*>& seen) {
  if (!seen.insert(&v).second) return;
  (void)v.describe();
  try {
    (void)v.as_int("fuzz");
  } catch (const zerotrain::Error&) {
  }
  (void)v.find("optimizer_state_dict");
  (void)v.find(int64_t{0});
  if (v.is(pk::Value::Kind::kTensor)) {
    (void)v.tensor.numel();
    (void)v.tensor.contiguous();
  }
  for (const auto& item : v.items) visit(*item, seen);
  for (const auto& [key, value] : v.entries) {
    visit(*key, seen);
    visit(*value, seen);
  }
  if (v.state) visit(*v.state, seen);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto pickle = pk::unpickle(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
    std::set<const pk::Value*> seen;
    visit(pickle->root(), seen);
  } catch (const zerotrain::Error&) {
  }
  return 0;
}
