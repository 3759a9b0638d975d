#include "tools/typed_errors.h"

#include <c10/util/Exception.h>

#include <new>
#include <string>

#include "zerotrain/core/env.h"

namespace zerotrain::tools {
namespace {

constexpr const char* kMemoryAdvice =
    "; `zerotrain estimate --detailed` shows what each part needs and `zerotrain advise --memory_per_rank SIZE` "
    "what fits (a higher ZeRO stage, bf16, a smaller micro-batch, more ranks)";

bool debug() { return env::get_bool("ZEROTRAIN_DEBUG").value_or(false); }

std::string first_lines(const std::string& text) {
  // c10 appends "Exception raised from ..." and, with TORCH_SHOW_CPP_STACKTRACES, frames.
  const auto cut = text.find("\nException raised from");
  std::string kept = cut == std::string::npos ? text : text.substr(0, cut);
  while (!kept.empty() && (kept.back() == '\n' || kept.back() == ' ')) kept.pop_back();
  return kept;
}

}  // namespace

std::unique_ptr<Error> as_typed_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::OutOfMemoryError& e) {
    return std::make_unique<ResourceError>(
        "out of memory in LibTorch: " + first_lines(debug() ? e.what() : e.what_without_backtrace()) + kMemoryAdvice);
  } catch (const c10::Error& e) {
    const std::string text = first_lines(debug() ? e.what() : e.what_without_backtrace());
    // The CPU allocator reports a failed allocation as a plain c10::Error ("DefaultCPUAllocator:
    // can't allocate memory" or "not enough memory", by version); errno 12 is ENOMEM.
    if (text.find("DefaultCPUAllocator") != std::string::npos || text.find("not enough memory") != std::string::npos) {
      return std::make_unique<ResourceError>("out of memory in LibTorch: " + text + kMemoryAdvice);
    }
    return std::make_unique<Error>(
        "libtorch", text + (debug() ? "" : "\n(set ZEROTRAIN_DEBUG=1 to see LibTorch's backtrace)"));
  } catch (const std::bad_alloc&) {
    return std::make_unique<ResourceError>("out of memory: an allocation failed" + std::string(kMemoryAdvice));
  } catch (const std::exception& e) {
    return std::make_unique<InternalError>(std::string("unexpected error: ") + e.what() +
                                           ". This is a zerotrain bug; please report it with this message.");
  } catch (...) {
    return std::make_unique<InternalError>("an exception of unknown type. This is a zerotrain bug; please report it.");
  }
}

}  // namespace zerotrain::tools
