// An open-addressing hash table from 64-bit keys to small values, built once and then only
// read: the BPE merge ranks and single-character ids, looked up in the innermost loop of
// encode, where std::unordered_map's node chasing cost a third of the time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zerotrain::text {

template <class Value>
class FlatTable {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};   // never a key: ids and code points are below 2^63

  // Room for `count` keys at a load of at most one half.
  void reserve(size_t count) {
    size_t capacity = 16;
    shift_ = 60;
    while (capacity < 2 * count) {
      capacity *= 2;
      --shift_;
    }
    slots_.assign(capacity, Slot{kEmpty, Value{}});
    mask_ = capacity - 1;
    size_ = 0;
  }

  // Adds `key` unless present; returns false when it was (the first value stays).
  bool insert(uint64_t key, const Value& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (size_t i = index(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, value};
        ++size_;
        return true;
      }
    }
  }

  const Value* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = index(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Value value;
  };
  size_t index(uint64_t key) const {
    // Fibonacci hashing: the multiply spreads pair keys, whose halves are small ids, into the
    // top bits, which index the table.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    for (const Slot& slot : old) {
      if (slot.key != kEmpty) insert(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace zerotrain::text
