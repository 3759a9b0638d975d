// Counts the bytes of buffers that live for part of a step (gradient buckets in flight,
// the step's fp32 copies), for the peak Engine::model_state_bytes() reports.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>

namespace zerotrain::stages {

class StagingMeter {
 public:
  // Counts `buffer` until release(); returns it.
  at::Tensor track(at::Tensor buffer) {
    now_nbytes_ += static_cast<int64_t>(buffer.nbytes());
    peak_nbytes_ = std::max(peak_nbytes_, now_nbytes_);
    return buffer;
  }
  void release(const at::Tensor& buffer) { now_nbytes_ -= static_cast<int64_t>(buffer.nbytes()); }
  // A buffer alive only inside one call, on top of what is tracked now.
  void note_temporary(int64_t nbytes) { peak_nbytes_ = std::max(peak_nbytes_, now_nbytes_ + nbytes); }
  int64_t peak_nbytes() const { return peak_nbytes_; }

 private:
  int64_t now_nbytes_ = 0;
  int64_t peak_nbytes_ = 0;
};

}  // namespace zerotrain::stages
