// Which kept buffer serves a request, and which are let go (no LibTorch). The engine's
// StagingPool (staging_pool.h) lends tensors by it; the estimator runs the same policy over
// sizes (plan.h, simulate_staging_peak), so the two count the same bytes.
//
// At most `kept` buffers are kept, lent or spare: as many as buckets alive at once when they
// fill in order. A request takes the smallest spare that is large enough; if none is, spares
// go, smallest first, until a new buffer fits under the count, and a new one is made. A
// request that finds every kept buffer lent (buckets filling out of order) gets a new one
// too, let go when it comes back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace zerotrain::stages {

template <class Buffer>   // movable, with int64_t numel() const
class BufferPool {
 public:
  explicit BufferPool(std::size_t kept) : kept_(std::max<std::size_t>(kept, 1)) {
    spares_.reserve(kept_ + 1);   // give_back never allocates
  }

  // `make(numel)` makes a new buffer; `dropped(buffer)` hears of each one let go.
  template <class Make, class Dropped>
  Buffer take(int64_t numel, Make&& make, Dropped&& dropped) {
    auto best = spares_.end();
    for (auto it = spares_.begin(); it != spares_.end(); ++it) {
      if (it->numel() >= numel && (best == spares_.end() || it->numel() < best->numel())) best = it;
    }
    if (best != spares_.end()) {
      Buffer b = std::move(*best);
      spares_.erase(best);
      ++lent_;
      return b;
    }
    while (!spares_.empty() && spares_.size() + lent_ >= kept_) drop_smallest(dropped);
    Buffer b = make(numel);
    ++lent_;
    return b;
  }

  template <class Dropped>
  void give_back(Buffer b, Dropped&& dropped) {
    --lent_;
    spares_.push_back(std::move(b));
    // More than `kept` may be lent at once (buckets that fill out of order): the extra go.
    while (!spares_.empty() && spares_.size() + lent_ > kept_) drop_smallest(dropped);
  }

  // The spares' sizes, smallest first: the pool's state between uses.
  std::vector<int64_t> spare_numels() const {
    std::vector<int64_t> sizes;
    for (const Buffer& b : spares_) sizes.push_back(b.numel());
    std::sort(sizes.begin(), sizes.end());
    return sizes;
  }

 private:
  template <class Dropped>
  void drop_smallest(Dropped& dropped) {
    auto smallest = std::min_element(spares_.begin(), spares_.end(),
                                     [](const Buffer& a, const Buffer& b) { return a.numel() < b.numel(); });
    dropped(*smallest);
    spares_.erase(smallest);
  }

  std::size_t kept_;
  std::size_t lent_ = 0;
  std::vector<Buffer> spares_;
};

}  // namespace zerotrain::stages
