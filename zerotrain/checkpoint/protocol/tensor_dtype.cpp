#include "zerotrain/checkpoint/protocol/tensor_dtype.h"

#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {

Dtype checkpoint_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: return Dtype::kBool;
    case at::kByte: return Dtype::kU8;
    case at::kChar: return Dtype::kI8;
    case at::kShort: return Dtype::kI16;
    case at::kInt: return Dtype::kI32;
    case at::kLong: return Dtype::kI64;
    case at::kHalf: return Dtype::kF16;
    case at::kBFloat16: return Dtype::kBF16;
    case at::kFloat: return Dtype::kF32;
    case at::kDouble: return Dtype::kF64;
    default:
      throw UsageError(std::string("a tensor of dtype ") + c10::toString(type) +
                       " cannot be saved in safetensors; convert it to a plain numeric dtype");
  }
}

at::ScalarType scalar_type(Dtype dtype) {
  switch (dtype) {
    case Dtype::kBool: return at::kBool;
    case Dtype::kU8: return at::kByte;
    case Dtype::kI8: return at::kChar;
    case Dtype::kI16: return at::kShort;
    case Dtype::kI32: return at::kInt;
    case Dtype::kI64: return at::kLong;
    case Dtype::kF16: return at::kHalf;
    case Dtype::kBF16: return at::kBFloat16;
    case Dtype::kF32: return at::kFloat;
    case Dtype::kF64: return at::kDouble;
  }
  return at::kFloat;
}

}  // namespace zerotrain::checkpoint
