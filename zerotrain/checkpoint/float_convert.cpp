#include "zerotrain/checkpoint/float_convert.h"

#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

// Elements are read and written with memcpy: the buffers are bytes from a file, with no
// alignment promised beyond what safetensors offsets give.
template <class T>
T load(const char* p, int64_t i) {
  T value;
  std::memcpy(&value, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}
template <class T>
void store(char* p, int64_t i, T value) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

double load_as_double(const char* p, Dtype dtype, int64_t i) {
  switch (dtype) {
    case Dtype::kF16: return float_from_f16(load<uint16_t>(p, i));
    case Dtype::kBF16: return float_from_bf16(load<uint16_t>(p, i));
    case Dtype::kF32: return load<float>(p, i);
    case Dtype::kF64: return load<double>(p, i);
    default: break;
  }
  ZT_INTERNAL_ASSERT(false, "convert_floats from ", dtype_tag(dtype));
  return 0;
}

void store_double(char* p, Dtype dtype, int64_t i, double value) {
  switch (dtype) {
    case Dtype::kF16: return store(p, i, f16_from_float(static_cast<float>(value)));
    case Dtype::kBF16: return store(p, i, bf16_from_float(static_cast<float>(value)));
    case Dtype::kF32: return store(p, i, static_cast<float>(value));
    case Dtype::kF64: return store(p, i, value);
    default: break;
  }
  ZT_INTERNAL_ASSERT(false, "convert_floats to ", dtype_tag(dtype));
}

}  // namespace

void convert_floats(const void* src, Dtype from, void* dst, Dtype to, int64_t numel) {
  ZT_INTERNAL_ASSERT(is_floating(from) && is_floating(to), "convert_floats of ", dtype_tag(from), " to ", dtype_tag(to));
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  if (from == to) {
    std::memcpy(out, in, static_cast<size_t>(numel * dtype_size(from)));
  } else if (from == Dtype::kF32 && to == Dtype::kBF16) {   // the common cases, without the double round trip
    for (int64_t i = 0; i < numel; ++i) store(out, i, bf16_from_float(load<float>(in, i)));
  } else if (from == Dtype::kF32 && to == Dtype::kF16) {
    for (int64_t i = 0; i < numel; ++i) store(out, i, f16_from_float(load<float>(in, i)));
  } else {
    for (int64_t i = 0; i < numel; ++i) store_double(out, to, i, load_as_double(in, from, i));
  }
}

}  // namespace zerotrain::checkpoint
