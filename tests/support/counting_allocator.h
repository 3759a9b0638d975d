// Per-thread accounting of LibTorch's CPU allocations, for tests that bound what a rank may
// hold: every byte a thread allocates while it has a budget counts against it until freed
// (whichever thread frees it). Threads without a budget allocate as before.
//
//   auto budget = zerotrain::test::CpuBudget::enter();   // this thread, from now on
//   ... build, train ...
//   EXPECT_LT(budget->peak_bytes(), limit);
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace zerotrain::test {

class CpuBudget {
 public:
  // Starts counting this thread's allocations (live and peak from zero); ends when the
  // returned handle and every allocation it counted are gone.
  static std::shared_ptr<CpuBudget> enter() {
    install();
    auto budget = std::shared_ptr<CpuBudget>(new CpuBudget);
    current() = budget;
    return budget;
  }
  // Stops counting this thread's allocations (frees of counted ones still count).
  static void leave() { current().reset(); }

  int64_t live_bytes() const { return live_.load(); }
  int64_t peak_bytes() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

 private:
  CpuBudget() = default;

  void add(int64_t n) {
    const int64_t now = live_.fetch_add(n) + n;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  void sub(int64_t n) { live_.fetch_sub(n); }

  static std::shared_ptr<CpuBudget>& current() {
    thread_local std::shared_ptr<CpuBudget> budget;
    return budget;
  }

  // Wraps the allocator LibTorch had; installed once for the process and never removed
  // (memory it counted may be freed at any time later). Some kernels (gelu's, for one)
  // allocate raw pointers, which must be their own context: so a counted allocation's
  // context is its data pointer, and its bookkeeping lives in a table.
  class Counting final : public c10::Allocator {
   public:
    explicit Counting(c10::Allocator* base) : base_(base), base_raw_deleter_(base->raw_deleter()) {}
    c10::DataPtr allocate(size_t n) override {
      c10::DataPtr inner = base_->allocate(n);
      std::shared_ptr<CpuBudget> budget = current();
      if (!budget || inner.get() == nullptr) return inner;
      budget->add(static_cast<int64_t>(n));
      void* data = inner.get();
      const c10::Device device = inner.device();
      {
        std::lock_guard<std::mutex> lock(table_mutex());
        table().emplace(data, Counted{std::move(inner), std::move(budget), static_cast<int64_t>(n)});
      }
      return {data, data, &Counting::release, device};
    }
    c10::DeleterFnPtr raw_deleter() const override { return &Counting::release; }
    void copy_data(void* dest, const void* src, std::size_t count) const override {
      base_->copy_data(dest, src, count);
    }

   private:
    struct Counted {
      c10::DataPtr inner;
      std::shared_ptr<CpuBudget> budget;
      int64_t nbytes;
    };
    // Never destroyed: tensors freed while the process exits still find them.
    static std::unordered_map<void*, Counted>& table() {
      static auto* counted = new std::unordered_map<void*, Counted>;
      return *counted;
    }
    static std::mutex& table_mutex() {
      static auto* m = new std::mutex;
      return *m;
    }
    // A counted allocation, or a raw one made while no budget counted (the base's).
    static void release(void* data) {
      std::optional<Counted> c;
      {
        std::lock_guard<std::mutex> lock(table_mutex());
        auto it = table().find(data);
        if (it != table().end()) {
          c.emplace(std::move(it->second));
          table().erase(it);
        }
      }
      if (c) {
        c->budget->sub(c->nbytes);
        return;   // c->inner frees the memory as it goes
      }
      instance()->base_raw_deleter_(data);
    }
    static Counting*& instance() {
      static Counting* counting = nullptr;
      return counting;
    }
    c10::Allocator* base_;
    c10::DeleterFnPtr base_raw_deleter_;
    friend class CpuBudget;
  };

  static void install() {
    static std::once_flag once;
    std::call_once(once, [] {
      static Counting counting(c10::GetCPUAllocator());
      Counting::instance() = &counting;
      c10::SetCPUAllocator(&counting, /*priority=*/255);
    });
  }

  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace zerotrain::test
