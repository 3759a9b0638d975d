// Where ZeRO-3 keeps a rank's parameter shard when `offload_param.device` is "nvme": on a
// disk, one chunk per bucket, read ahead of its unit's gather and written after the step
// (the implementation lives in zerotrain/offload/; the stage sees this interface only).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zerotrain::stages::stage3 {

class ParamSwap {
 public:
  using Pending = uint64_t;
  virtual ~ParamSwap() = default;
  // Group `group` (added in order) has one chunk per bucket of these sizes, in `dtype`.
  virtual void add_group(std::size_t group, const std::vector<int64_t>& chunk_numels, at::ScalarType dtype) = 0;
  // Chunk `bucket` of `group` onto the disk; returns once it is there.
  virtual void write(std::size_t group, std::size_t bucket, const at::Tensor& chunk) = 0;
  // Reads start now and finish later: finish_read returns the chunk (a tensor of its own).
  virtual Pending start_read(std::size_t group, std::size_t bucket) = 0;
  virtual at::Tensor finish_read(Pending pending) = 0;
  virtual int64_t disk_nbytes() const = 0;
  virtual std::string describe() const = 0;
};

}  // namespace zerotrain::stages::stage3
