// One file written by torch.save (its zip format): the pickled object, read whole (it is
// small), and its tensors' elements, read from the file in pieces when asked for, so that a
// large checkpoint is never in memory. The zip is LibTorch's reader's; the pickle is ours
// (pickle.h), as LibTorch's refuses classes it does not know.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "zerotrain/checkpoint/deepspeed/pickle.h"

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace zerotrain::checkpoint {

class TorchFile {
 public:
  // CheckpointError naming the file where it is not a torch.save zip (the legacy format of
  // `_use_new_zipfile_serialization=False` included) or its pickle cannot be read.
  explicit TorchFile(std::filesystem::path path);
  ~TorchFile();
  TorchFile(const TorchFile&) = delete;
  TorchFile& operator=(const TorchFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const pickle::Value& root() const { return pickle_->root(); }

  // Elements [begin, begin + count) of `t` in row-major order, as fp32 (from fp32, fp64,
  // bf16 or fp16), into dst. `what` names the tensor in errors (a non-contiguous tensor, a
  // range beyond it, a storage record of the wrong size).
  void read_f32(const pickle::TensorRef& t, int64_t begin, int64_t count, float* dst, std::string_view what) const;
  // The raw bytes of the whole of `t` (any dtype), for small tensors (buffers, scalars).
  std::vector<char> read_bytes(const pickle::TensorRef& t, std::string_view what) const;
  // A 0- or 1-element tensor's value (DeepSpeed's Adam step), as a double.
  double read_scalar(const pickle::TensorRef& t, std::string_view what) const;

 private:
  int64_t storage_offset_bytes(const pickle::TensorRef& t, std::string_view what) const;
  void pread_exact(int64_t offset, int64_t bytes, void* dst) const;

  std::filesystem::path path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
  std::unique_ptr<pickle::Pickle> pickle_;
  int fd_ = -1;
};

}  // namespace zerotrain::checkpoint
