// Python's pickle, read into a tree of values without Python: what torch.save writes (data.pkl
// inside its zip), protocols 2 to 5. A class this reader does not know (DeepSpeed's loss
// scaler, its enums and dataclasses) becomes an Object holding the class's name, the
// arguments it was made with and the state it was given, so a checkpoint that pickles them
// reads without DeepSpeed installed. Tensors stay on disk: a Tensor value says where its
// elements are (storage record, dtype, offset, shape, strides). No LibTorch.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::checkpoint::pickle {

struct Value;
// A value inside a Pickle, which owns it: the memo lets a pickle make values refer to each
// other in circles (a list that holds itself), which shared ownership would leak.
using ValuePtr = Value*;

struct TensorRef {
  std::string storage;  // the record under data/ in the archive ("0", "1", ...)
  Dtype dtype = Dtype::kF32;
  int64_t storage_numel = 0;  // elements in the storage
  int64_t offset = 0;         // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t numel() const;
  bool contiguous() const;  // row-major with these strides (any strides of size-1 dimensions)
};

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kList,
    kTuple,
    kDict,
    kObject,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;                                    // kString, kBytes; kGlobal and kObject: "module.Name"
  std::vector<ValuePtr> items;                         // kList, kTuple; kObject: the arguments it was made with
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in insertion order
  ValuePtr state;                                      // kObject: what BUILD gave it (a dict, mostly)
  TensorRef tensor;                                    // kStorage (shape empty) and kTensor

  // Readers for the interpreting code; each throws CheckpointError naming `what` and the kind
  // found where it is not the one asked for.
  bool is(Kind k) const { return kind == k; }
  bool is_none() const { return kind == Kind::kNone; }
  const Value* find(std::string_view key) const;  // a dict's (or an object's state's) string key
  const Value* find(int64_t key) const;           // a dict's integer key
  const Value& at(std::string_view key, std::string_view what) const;
  int64_t as_int(std::string_view what) const;    // int or bool
  double as_number(std::string_view what) const;  // float or int
  const std::string& as_string(std::string_view what) const;
  const std::vector<ValuePtr>& as_items(std::string_view what) const;  // list or tuple
  const TensorRef& as_tensor(std::string_view what) const;
  std::string describe() const;  // a short description for messages ("a dict of 4 keys")
};

// The values of one pickle, alive as long as it is.
class Pickle {
 public:
  const Value& root() const { return *root_; }
  Value* add();   // a new value (None), owned here

 private:
  friend std::unique_ptr<Pickle> unpickle(std::string_view bytes, std::string_view file);
  std::deque<Value> values_;   // a deque: adding never moves the values already made
  Value* root_ = nullptr;
};

// Unpickles `bytes`; `file` names them in errors ("…/mp_rank_00_model_states.pt").
std::unique_ptr<Pickle> unpickle(std::string_view bytes, std::string_view file);

}  // namespace zerotrain::checkpoint::pickle
