#include "zerotrain/data/tokenized/packing.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "zerotrain/core/error.h"

namespace zerotrain::data::tokenized {
namespace {

struct Encoded {
  std::vector<int32_t> prompt, text;
};

struct OwnedStream {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> trained;
  std::vector<int64_t> starts;
};

int thread_count(int requested) {
  if (requested > 0) return requested;
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 8u));
}

}  // namespace

Packer::Packer(const TextEncoder& encoder, std::string source, const PackOptions& options)
    : encoder_(encoder), source_(std::move(source)), threads_(thread_count(options.threads)),
      batch_bytes_(std::max<int64_t>(options.batch_bytes, 1)) {
  check_encoder(encoder_);
}

void Packer::add(Document&& document) {
  pending_bytes_ += static_cast<int64_t>(document.prompt.size() + document.text.size());
  pending_.push_back(std::move(document));
  if (pending_bytes_ >= batch_bytes_) encode_pending();
}

void Packer::encode_pending() {
  const auto n = static_cast<int64_t>(pending_.size());
  std::vector<Encoded> encoded(static_cast<size_t>(n));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  // The first document that failed: the same one for any thread count. The documents after
  // it are skipped, those before it still encoded (one of them may fail first).
  std::atomic<int64_t> failed{n};
  std::mutex failure_mutex;
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) {
      if (i > failed.load()) continue;
      try {
        const Document& document = pending_[static_cast<size_t>(i)];
        Encoded& out = encoded[static_cast<size_t>(i)];
        if (document.prompt.empty()) {
          if (!document.text.empty()) out.text = encoder_.encode(document.text);
        } else {
          out.text = encoder_.encode(document.prompt + document.text);
          const std::vector<int32_t> prompt = encoder_.encode(document.prompt);
          const auto shared = static_cast<size_t>(
              std::mismatch(prompt.begin(), prompt.end(), out.text.begin(), out.text.end()).first - prompt.begin());
          out.prompt.assign(out.text.begin(), out.text.begin() + static_cast<std::ptrdiff_t>(shared));
          out.text.erase(out.text.begin(), out.text.begin() + static_cast<std::ptrdiff_t>(shared));
        }
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (i < failed.load()) {
          failure = std::current_exception();
          failed = i;
        }
      }
    }
  };
  const int helpers = static_cast<int>(std::min<int64_t>(threads_, n)) - 1;
  std::vector<std::thread> pool;
  for (int t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  const int64_t first_document = static_cast<int64_t>(starts_.size());
  if (failure) {
    // The tokenizer's own message (a regex or normalization failure) names no document;
    // zerotrain's typed errors keep their type (and exit code).
    const Document& document = pending_[static_cast<size_t>(failed.load())];
    const std::string which = document.line > 0 ? detail::str("line ", document.line)
                                                 : detail::str("document ", first_document + failed.load() + 1);
    try {
      std::rethrow_exception(failure);
    } catch (const Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw IoError(detail::str(source_, " ", which, " could not be tokenised: ", e.what(),
                                "; remove or split that document, or tokenise with another tokenizer"));
    }
  }

  auto append = [&](const std::vector<int32_t>& ids, uint8_t trained, int64_t document) {
    for (const int32_t id : ids) {
      ZT_CHECK(id >= 0 && id < encoder_.vocab_size, ConfigError, source_, ": the tokenizer gave id ", id,
               " for document ", document + 1, ", outside its vocabulary [0, ", encoder_.vocab_size,
               "); the tokenizer's vocabulary size does not match its ids");
    }
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    trained_.insert(trained_.end(), ids.size(), trained);
  };
  for (int64_t i = 0; i < n; ++i) {
    const Encoded& e = encoded[static_cast<size_t>(i)];
    starts_.push_back(static_cast<int64_t>(tokens_.size()));
    if (encoder_.bos_id) {
      tokens_.push_back(*encoder_.bos_id);
      trained_.push_back(0);
    }
    append(e.prompt, 0, first_document + i);
    append(e.text, 1, first_document + i);
    tokens_.push_back(encoder_.eos_id);
    trained_.push_back(1);
  }
  pending_.clear();
  pending_bytes_ = 0;
}

TokenStream Packer::finish() {
  encode_pending();
  auto owned = std::make_shared<OwnedStream>();
  owned->tokens = std::move(tokens_);
  owned->trained = std::move(trained_);
  owned->starts = std::move(starts_);
  tokens_.clear();
  trained_.clear();
  starts_.clear();
  TokenStream stream;
  stream.tokens = owned->tokens;
  stream.trained = owned->trained;
  stream.document_starts = owned->starts;
  stream.storage = std::move(owned);
  return stream;
}

TokenStream pack_documents(std::vector<Document> documents, const TextEncoder& encoder, const std::string& source,
                           const PackOptions& options) {
  Packer packer(encoder, source, options);
  for (Document& document : documents) packer.add(std::move(document));
  return packer.finish();
}

}  // namespace zerotrain::data::tokenized
