#include "zerotrain/checkpoint/deepspeed/pickle.h"

#include <cstring>
#include <map>
#include <optional>

#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint::pickle {
namespace {

using Kind = Value::Kind;


std::optional<Dtype> storage_dtype(std::string_view cls) {
  static const std::map<std::string_view, Dtype> kTypes = {
      {"torch.FloatStorage", Dtype::kF32},  {"torch.DoubleStorage", Dtype::kF64}, {"torch.HalfStorage", Dtype::kF16},
      {"torch.BFloat16Storage", Dtype::kBF16}, {"torch.LongStorage", Dtype::kI64}, {"torch.IntStorage", Dtype::kI32},
      {"torch.ShortStorage", Dtype::kI16},  {"torch.CharStorage", Dtype::kI8},   {"torch.ByteStorage", Dtype::kU8},
      {"torch.BoolStorage", Dtype::kBool}};
  auto it = kTypes.find(cls);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

// The pickle machine: a stack with marks, and the memo. Only what torch.save's data.pkl and
// plain Python containers need; any other opcode is an error that names it.
class Machine {
 public:
  Machine(std::string_view bytes, std::string_view file, Pickle& out) : in_(bytes), file_(file), out_(out) {}

  ValuePtr run() {
    for (;;) {
      ZT_CHECK(pos_ < in_.size(), CheckpointError, file_, ": the pickle ends without its STOP opcode (truncated?)");
      const auto op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') {
        ZT_CHECK(stack_.size() == 1, CheckpointError, file_, ": the pickle stops with ", stack_.size(),
                 " values on its stack instead of 1");
        return stack_.back();
      }
      step(op);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw CheckpointError(detail::str(file_, ": cannot read its pickle at byte ", pos_, ": ", why));
  }
  std::string_view take(size_t n) {
    if (in_.size() - pos_ < n) fail("it ends in the middle of a value (truncated?)");
    auto out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  template <class T>
  T le() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  std::string_view line() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) fail("a text field has no end of line");
    auto out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("a value is missing on its stack");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) fail("MARK missing");
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  ValuePtr& top() {
    if (stack_.empty()) fail("a value is missing on its stack");
    return stack_.back();
  }
  void push(ValuePtr v) { stack_.push_back(v); }
  ValuePtr make(Kind kind) {
    ValuePtr v = out_.add();
    v->kind = kind;
    return v;
  }
  ValuePtr text(Kind kind, std::string_view s) {
    auto v = make(kind);
    v->text = std::string(s);
    return v;
  }
  ValuePtr integer(int64_t i) {
    auto v = make(Kind::kInt);
    v->integer = i;
    return v;
  }
  ValuePtr long_bytes(std::string_view b) {
    if (b.size() > 8) fail("an integer wider than 64 bits");
    uint64_t u = 0;
    for (size_t i = 0; i < b.size(); ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    if (!b.empty() && b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) u |= ~uint64_t{0} << (8 * b.size());
    return integer(static_cast<int64_t>(u));
  }
  ValuePtr tuple(std::vector<ValuePtr> items) {
    auto v = make(Kind::kTuple);
    v->items = std::move(items);
    return v;
  }
  void memo_put(uint32_t index) { memo_[index] = top(); }
  ValuePtr memo_get(uint32_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(detail::str("memo entry ", index, " was never stored"));
    return it->second;
  }
  void set_items(const ValuePtr& target, const std::vector<ValuePtr>& kv) {
    if (target->kind != Kind::kDict) fail("SETITEM(S) on " + target->describe());
    for (size_t i = 0; i + 1 < kv.size(); i += 2) target->entries.emplace_back(kv[i], kv[i + 1]);
  }
  void append(const ValuePtr& target, const std::vector<ValuePtr>& items) {
    if (target->kind != Kind::kList) fail("APPEND(S) on " + target->describe());
    target->items.insert(target->items.end(), items.begin(), items.end());
  }

  // A call of `callable` (a global) with `args`: what torch's and Python's own globals make,
  // else an Object that remembers the class and its arguments.
  ValuePtr call(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Kind::kGlobal) fail("a call of " + callable->describe());
    const std::string& name = callable->text;
    const auto& a = args->items;
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || a[0]->kind != Kind::kStorage) fail(name + " without a storage, offset, size and stride");
      auto t = make(Kind::kTensor);
      t->tensor = a[0]->tensor;
      t->tensor.offset = a[1]->as_int("the tensor's storage offset");
      for (const auto& d : a[2]->as_items("the tensor's size")) t->tensor.shape.push_back(d->as_int("a dimension"));
      for (const auto& s : a[3]->as_items("the tensor's stride")) t->tensor.strides.push_back(s->as_int("a stride"));
      if (t->tensor.shape.size() != t->tensor.strides.size()) fail("a tensor whose size and stride differ in length");
      return t;
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {   // (func, type, args, state): a tensor subclass
      if (a.size() < 3) fail(name + " without its function and arguments");
      return call(a[0], a[2]);
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != Kind::kTensor) fail(name + " without a tensor");
      return a[0];
    }
    if (name == "collections.OrderedDict" || name == "builtins.dict") return make(Kind::kDict);
    if (name == "torch.Size" || name == "builtins.tuple") {
      return a.empty() ? tuple({}) : tuple(a[0]->as_items("torch.Size's dimensions"));
    }
    if (name == "builtins.list" || name == "builtins.set" || name == "builtins.frozenset") {
      auto v = make(Kind::kList);
      if (!a.empty()) v->items = a[0]->as_items(name + "'s items");
      return v;
    }
    if (name == "_codecs.encode" && !a.empty() && a[0]->kind == Kind::kString) {   // bytes in protocol 2
      return text(Kind::kBytes, a[0]->text);
    }
    auto obj = make(Kind::kObject);
    obj->text = name;
    obj->items = a;
    return obj;
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: take(1); break;                                   // PROTO
      case 0x95: take(8); break;                                   // FRAME: a hint only
      case '(': marks_.push_back(stack_.size()); break;            // MARK
      case '}': push(make(Kind::kDict)); break;                    // EMPTY_DICT
      case ']': push(make(Kind::kList)); break;                    // EMPTY_LIST
      case ')': push(tuple({})); break;                            // EMPTY_TUPLE
      case 0x8f: push(make(Kind::kList)); break;                   // EMPTY_SET, read as a list
      case 't': push(tuple(pop_to_mark())); break;                 // TUPLE
      case 0x85: { auto a = pop(); push(tuple({a})); break; }      // TUPLE1
      case 0x86: { auto b = pop(), a = pop(); push(tuple({a, b})); break; }
      case 0x87: { auto c = pop(), b = pop(), a = pop(); push(tuple({a, b, c})); break; }
      case 'l': { auto v = make(Kind::kList); v->items = pop_to_mark(); push(v); break; }   // LIST
      case 'd': { auto v = make(Kind::kDict); set_items(v, pop_to_mark()); push(v); break; }  // DICT
      case 0x91: { auto v = make(Kind::kList); v->items = pop_to_mark(); push(v); break; }  // FROZENSET
      case 'N': push(make(Kind::kNone)); break;
      case 0x88: case 0x89: { auto v = make(Kind::kBool); v->boolean = op == 0x88; push(v); break; }
      case 'J': push(integer(le<int32_t>())); break;               // BININT
      case 'K': push(integer(le<uint8_t>())); break;               // BININT1
      case 'M': push(integer(le<uint16_t>())); break;              // BININT2
      case 0x8a: { const auto n = le<uint8_t>(); push(long_bytes(take(n))); break; }    // LONG1
      case 0x8b: {                                                 // LONG4
        const auto n = le<int32_t>();
        if (n < 0) fail("a negative length");
        push(long_bytes(take(static_cast<size_t>(n))));
        break;
      }
      case 'G': {                                                  // BINFLOAT: big-endian
        uint64_t u = 0;
        for (char c : take(8)) u = (u << 8) | static_cast<uint8_t>(c);
        auto v = make(Kind::kFloat);
        std::memcpy(&v->number, &u, 8);
        push(v);
        break;
      }
      case 'X': push(text(Kind::kString, take(le<uint32_t>()))); break;     // BINUNICODE
      case 0x8c: push(text(Kind::kString, take(le<uint8_t>()))); break;     // SHORT_BINUNICODE
      case 0x8d: push(text(Kind::kString, take(le<uint64_t>()))); break;    // BINUNICODE8
      case 'T': push(text(Kind::kString, take(le<uint32_t>()))); break;     // BINSTRING
      case 'U': push(text(Kind::kString, take(le<uint8_t>()))); break;      // SHORT_BINSTRING
      case 'B': push(text(Kind::kBytes, take(le<uint32_t>()))); break;      // BINBYTES
      case 'C': push(text(Kind::kBytes, take(le<uint8_t>()))); break;       // SHORT_BINBYTES
      case 0x8e: push(text(Kind::kBytes, take(le<uint64_t>()))); break;     // BINBYTES8
      case 'q': memo_put(le<uint8_t>()); break;                    // BINPUT
      case 'r': memo_put(le<uint32_t>()); break;                   // LONG_BINPUT
      case 0x94: memo_put(static_cast<uint32_t>(memo_.size())); break;   // MEMOIZE
      case 'h': push(memo_get(le<uint8_t>())); break;              // BINGET
      case 'j': push(memo_get(le<uint32_t>())); break;             // LONG_BINGET
      case 'a': { auto v = pop(); append(top(), {v}); break; }     // APPEND
      case 'e': { auto items = pop_to_mark(); append(top(), items); break; }   // APPENDS
      case 0x90: { auto items = pop_to_mark(); append(top(), items); break; }  // ADDITEMS
      case 's': { auto v = pop(), k = pop(); set_items(top(), {k, v}); break; }  // SETITEM
      case 'u': { auto kv = pop_to_mark(); set_items(top(), kv); break; }      // SETITEMS
      case '0': pop(); break;                                      // POP
      case '1': pop_to_mark(); break;                              // POP_MARK
      case '2': push(top()); break;                                // DUP
      case 'c': {                                                  // GLOBAL "module\nname\n"
        const std::string module(line());
        push(text(Kind::kGlobal, module + "." + std::string(line())));
        break;
      }
      case 0x93: {                                                 // STACK_GLOBAL
        auto name = pop(), module = pop();
        push(text(Kind::kGlobal, module->as_string("a global's module") + "." + name->as_string("a global's name")));
        break;
      }
      case 'R': { auto args = pop(), callable = pop(); push(call(callable, args)); break; }   // REDUCE
      case 0x81: { auto args = pop(), cls = pop(); push(call(cls, args)); break; }            // NEWOBJ
      case 0x92: { pop(); auto args = pop(), cls = pop(); push(call(cls, args)); break; }     // NEWOBJ_EX
      case 'b': {                                                  // BUILD
        auto state = pop();
        ValuePtr& target = top();
        if (target->kind == Kind::kObject) {
          target->state = state;
        } else if (target->kind == Kind::kTensor || target->kind == Kind::kDict) {
          // a tensor's or an OrderedDict's extra state (hooks, attributes): nothing to keep
        } else {
          fail("BUILD on " + target->describe());
        }
        break;
      }
      case 'Q': push(persistent(pop())); break;                    // BINPERSID
      default: fail(detail::str("opcode 0x", std::hex, static_cast<int>(op), " is not one this reader knows"));
    }
  }

  // torch.save's persistent ids: ("storage", <torch.XStorage>, key, location, numel).
  ValuePtr persistent(const ValuePtr& pid) {
    const auto& a = pid->as_items("a persistent id");
    if (a.size() < 5 || a[0]->kind != Kind::kString || a[0]->text != "storage") {
      fail("a persistent id that is not torch.save's storage reference");
    }
    if (a[1]->kind != Kind::kGlobal) fail("a storage whose type is " + a[1]->describe());
    const auto dtype = storage_dtype(a[1]->text);
    if (!dtype) {
      fail("storage type " + a[1]->text +
           " is not one this reader knows (float, half, bfloat16, double, integers, bool)");
    }
    auto v = make(Kind::kStorage);
    v->tensor.storage = a[2]->as_string("a storage's key");
    v->tensor.dtype = *dtype;
    v->tensor.storage_numel = a[4]->as_int("a storage's size");
    return v;
  }

  std::string_view in_;
  std::string_view file_;
  Pickle& out_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint32_t, ValuePtr> memo_;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a string";
    case Kind::kBytes: return "bytes";
    case Kind::kList: return "a list";
    case Kind::kTuple: return "a tuple";
    case Kind::kDict: return "a dict";
    case Kind::kObject: return "an object";
    case Kind::kGlobal: return "a global";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "?";
}

}  // namespace

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorRef::contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

const Value* Value::find(std::string_view key) const {
  if (kind == Kind::kObject) return state ? state->find(key) : nullptr;
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries) {
    if (k->kind == Kind::kString && k->text == key) return v;
  }
  return nullptr;
}

const Value* Value::find(int64_t key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries) {
    if (k->kind == Kind::kInt && k->integer == key) return v;
  }
  return nullptr;
}

const Value& Value::at(std::string_view key, std::string_view what) const {
  const Value* v = find(key);
  ZT_CHECK(v != nullptr, CheckpointError, what, ": no key '", key, "' in ", describe());
  return *v;
}

int64_t Value::as_int(std::string_view what) const {
  if (kind == Kind::kBool) return boolean ? 1 : 0;
  ZT_CHECK(kind == Kind::kInt, CheckpointError, what, ": expected an integer, found ", describe());
  return integer;
}

double Value::as_number(std::string_view what) const {
  if (kind == Kind::kInt) return static_cast<double>(integer);
  ZT_CHECK(kind == Kind::kFloat, CheckpointError, what, ": expected a number, found ", describe());
  return number;
}

const std::string& Value::as_string(std::string_view what) const {
  ZT_CHECK(kind == Kind::kString, CheckpointError, what, ": expected a string, found ", describe());
  return text;
}

const std::vector<ValuePtr>& Value::as_items(std::string_view what) const {
  ZT_CHECK(kind == Kind::kList || kind == Kind::kTuple, CheckpointError, what, ": expected a list, found ", describe());
  return items;
}

const TensorRef& Value::as_tensor(std::string_view what) const {
  ZT_CHECK(kind == Kind::kTensor, CheckpointError, what, ": expected a tensor, found ", describe());
  return tensor;
}

std::string Value::describe() const {
  switch (kind) {
    case Kind::kInt: return detail::str("the int ", integer);
    case Kind::kFloat: return detail::str("the float ", number);
    case Kind::kString: return "the string '" + text.substr(0, 40) + "'";
    case Kind::kList: case Kind::kTuple: return detail::str(kind_name(kind), " of ", items.size());
    case Kind::kDict: return detail::str("a dict of ", entries.size(), " keys");
    case Kind::kObject: return "an object of class " + text;
    case Kind::kGlobal: return "the global " + text;
    case Kind::kTensor: return detail::str("a ", dtype_tag(tensor.dtype), " tensor of ", tensor.numel(), " elements");
    default: return kind_name(kind);
  }
}

Value* Pickle::add() { return &values_.emplace_back(); }

std::unique_ptr<Pickle> unpickle(std::string_view bytes, std::string_view file) {
  auto out = std::make_unique<Pickle>();
  out->root_ = Machine(bytes, file, *out).run();
  return out;
}

}  // namespace zerotrain::checkpoint::pickle
