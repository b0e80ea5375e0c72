#include "models/torch_checkpoint.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "core/tensor.h"
#include "models/safetensors.h"
#include "models/zip_archive.h"

namespace brigade {
namespace {

// ---- The pickle machine -------------------------------------------------------------------

using Ref = uint32_t;  // index into Unpickler::values_

enum class Kind : uint8_t { none, boolean, integer, big_integer, floating, text, bytes, tuple, list, dict, global,
                            storage, tensor };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "a bool";
    case Kind::integer: case Kind::big_integer: return "an int";
    case Kind::floating: return "a float";
    case Kind::text: return "a str";
    case Kind::bytes: return "bytes";
    case Kind::tuple: return "a tuple";
    case Kind::list: return "a list";
    case Kind::dict: return "a dict";
    case Kind::global: return "a global";
    case Kind::storage: return "a storage";
    case Kind::tensor: return "a tensor";
  }
  return "a value";
}

struct Value {
  Kind kind = Kind::none;
  int64_t i = 0;           // integer, boolean
  double f = 0.0;          // floating
  std::string s;           // text, bytes, global ("module.name"), big_integer (little-endian two's complement)
  std::vector<Ref> items;  // tuple, list; dict as key, value, key, value, ...
  int32_t index = -1;      // storage, tensor: into storages_ / tensors_
};

struct StorageInfo {
  std::string type;  // "FloatStorage"
  std::string key;
  int64_t numel = 0;
};

struct TensorInfo {
  int32_t storage = -1;
  std::string dtype;  // torch's name: "float32"
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

// torch's dtype names (torch.<name> globals: _rebuild_tensor_v3's dtype argument).
bool torch_dtype_name(const std::string& n) {
  static const std::set<std::string> kDtypes = {
      "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int64", "long", "int32", "int",
      "int16", "short", "int8", "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
      "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"};
  return kDtypes.count(n) > 0;
}

// The dtype of a typed storage class ("FloatStorage" -> "float32"); empty for one brigade does not know.
std::string storage_class_dtype(const std::string& cls) {
  static const std::map<std::string, std::string> kClasses = {
      {"FloatStorage", "float32"}, {"HalfStorage", "float16"}, {"BFloat16Storage", "bfloat16"},
      {"DoubleStorage", "float64"}, {"LongStorage", "int64"},  {"IntStorage", "int32"},
      {"ShortStorage", "int16"},   {"CharStorage", "int8"},    {"ByteStorage", "uint8"},
      {"BoolStorage", "bool"},     {"ComplexFloatStorage", "complex64"}, {"ComplexDoubleStorage", "complex128"},
      {"UntypedStorage", "uint8"}};
  auto it = kClasses.find(cls);
  return it == kClasses.end() ? std::string() : it->second;
}

// The globals a tensor state dict names; everything else is refused at GLOBAL.
bool allowed_global(const std::string& g) {
  static const std::set<std::string> kNames = {
      "collections.OrderedDict",        "torch._utils._rebuild_tensor",
      "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
      "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
      "torch._tensor._rebuild_from_type_v2", "torch.Tensor",
      "torch.nn.parameter.Parameter",   "torch.storage.UntypedStorage",
      "torch.Size",                     "_codecs.encode"};
  if (kNames.count(g)) return true;
  if (g.starts_with("torch.") && torch_dtype_name(g.substr(6))) return true;
  // torch.<Type>Storage: a storage type in a persistent id (its DType is checked per tensor).
  if (!g.starts_with("torch.") || !g.ends_with("Storage") || g.size() <= 13) return false;
  return std::all_of(g.begin() + 6, g.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string hex_byte(uint8_t b) { return {'0', 'x', "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15]}; }

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> data, std::string where) : data_(data), where_(std::move(where)) {}

  // Runs to STOP; the value left on the stack.
  Expected<Ref> run();
  size_t consumed() const { return pos_; }
  const Value& at(Ref r) const { return values_[r]; }
  const std::vector<StorageInfo>& storages() const { return storages_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  Status fail(const std::string& what) const {
    return corrupt(where_ + ": pickle byte " + std::to_string(op_at_) + ": " + what);
  }
  Status need(uint64_t n) const {
    if (data_.size() - pos_ < n) return fail("truncated (needs " + std::to_string(n) + " more bytes)");
    return Status::ok();
  }
  template <typename T>
  Expected<T> read() {
    BRIGADE_RETURN_IF_ERROR(need(sizeof(T)));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Expected<std::string> read_bytes(uint64_t n) {
    BRIGADE_RETURN_IF_ERROR(need(n));
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  Expected<std::string> read_line() {
    const auto* begin = data_.data() + pos_;
    const auto* nl = static_cast<const uint8_t*>(std::memchr(begin, '\n', data_.size() - pos_));
    if (nl == nullptr) return fail("truncated (a text argument without its newline)");
    std::string s(reinterpret_cast<const char*>(begin), static_cast<size_t>(nl - begin));
    pos_ += s.size() + 1;
    return s;
  }
  Expected<int64_t> read_decimal() {  // the protocol-0 forms: I123, L123L, GET/PUT indices
    BRIGADE_ASSIGN_OR_RETURN(std::string line, read_line());
    if (!line.empty() && line.back() == 'L') line.pop_back();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size()) return fail("'" + line + "' is not an integer");
    return v;
  }

  Ref make(Value v) {
    values_.push_back(std::move(v));
    return static_cast<Ref>(values_.size() - 1);
  }
  Ref make_int(int64_t i) { return make(Value{.kind = Kind::integer, .i = i}); }
  void push(Ref r) { stack_.push_back(r); }
  Expected<Ref> pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return fail("stack underflow");
    const Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Expected<Ref> top() const {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return fail("stack underflow");
    return stack_.back();
  }
  // The items pushed since the last MARK, which is removed.
  Expected<std::vector<Ref>> pop_mark() {
    if (marks_.empty()) return fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Status memo_put(uint64_t index) {
    BRIGADE_ASSIGN_OR_RETURN(Ref r, top());
    memo_[index] = r;
    return Status::ok();
  }
  Status memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return fail("memo index " + std::to_string(index) + " was never stored");
    push(it->second);
    return Status::ok();
  }
  Status push_long(std::string le_bytes);
  Status push_text(std::string s) {
    push(make(Value{.kind = Kind::text, .s = std::move(s)}));
    return Status::ok();
  }
  Status push_bytes(std::string s) {
    push(make(Value{.kind = Kind::bytes, .s = std::move(s)}));
    return Status::ok();
  }
  Status push_global(const std::string& module, const std::string& name);
  Status add_items(Ref container, const std::vector<Ref>& items);
  Status set_items(Ref dict, const std::vector<Ref>& items);
  Expected<Ref> call(Ref func, Ref args);
  Expected<Ref> rebuild_tensor(const std::vector<Ref>& args, const std::string& func);
  Expected<Ref> persistent_load(Ref pid);
  Expected<std::vector<int64_t>> int_tuple(Ref r, const std::string& what) const;
  Status step(uint8_t op);

  std::span<const uint8_t> data_;
  std::string where_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Value> values_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::vector<StorageInfo> storages_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, int32_t> storage_by_key_;
  bool stopped_ = false;
};

Status Unpickler::push_long(std::string le_bytes) {
  // Two's complement, little-endian; up to 8 bytes as an int64, longer kept as bytes (the legacy
  // stream's magic number is 10 bytes).
  if (le_bytes.size() > 8) {
    push(make(Value{.kind = Kind::big_integer, .s = std::move(le_bytes)}));
    return Status::ok();
  }
  uint64_t u = 0;
  for (size_t k = 0; k < le_bytes.size(); ++k) u |= uint64_t{static_cast<uint8_t>(le_bytes[k])} << (8 * k);
  if (!le_bytes.empty() && le_bytes.size() < 8 && (static_cast<uint8_t>(le_bytes.back()) & 0x80u))
    u |= ~uint64_t{0} << (8 * le_bytes.size());  // sign-extend
  push(make_int(static_cast<int64_t>(u)));
  return Status::ok();
}

Status Unpickler::push_global(const std::string& module, const std::string& name) {
  const std::string g = module + "." + name;
  if (!allowed_global(g))
    return unsupported(where_ + ": the pickle names the global '" + g +
                       "', which a tensor state dict does not: brigade reads state dicts of tensors only (as "
                       "torch.load(weights_only=True) does) and runs no code from the file");
  push(make(Value{.kind = Kind::global, .s = g}));
  return Status::ok();
}

Status Unpickler::add_items(Ref container, const std::vector<Ref>& items) {
  Value& c = values_[container];
  if (c.kind != Kind::list) return fail(std::string("APPEND / ADDITEMS to ") + kind_name(c.kind) + ", not a list or set");
  c.items.insert(c.items.end(), items.begin(), items.end());
  return Status::ok();
}

Status Unpickler::set_items(Ref dict, const std::vector<Ref>& items) {
  Value& d = values_[dict];
  if (d.kind != Kind::dict) return fail(std::string("SETITEM(S) on ") + kind_name(d.kind) + ", not a dict");
  if (items.size() % 2 != 0) return fail("SETITEMS with an odd number of items");
  d.items.insert(d.items.end(), items.begin(), items.end());
  return Status::ok();
}

Expected<std::vector<int64_t>> Unpickler::int_tuple(Ref r, const std::string& what) const {
  const Value& v = values_[r];
  if (v.kind != Kind::tuple && v.kind != Kind::list) return fail(what + " is " + kind_name(v.kind) + ", not a tuple");
  std::vector<int64_t> out;
  for (Ref e : v.items) {
    if (values_[e].kind != Kind::integer || values_[e].i < 0)
      return fail(what + " holds " + std::string(kind_name(values_[e].kind)) + (values_[e].kind == Kind::integer ? " < 0" : "") +
                  ", not a non-negative int");
    out.push_back(values_[e].i);
  }
  return out;
}

Expected<Ref> Unpickler::persistent_load(Ref pid) {
  const Value& p = values_[pid];
  // ('storage', torch.<Type>Storage, key, location, numel[, view_metadata])
  if (p.kind != Kind::tuple || p.items.size() < 5 || values_[p.items[0]].kind != Kind::text ||
      values_[p.items[0]].s != "storage")
    return fail("a persistent id that is not ('storage', type, key, location, numel)");
  const Value& type = values_[p.items[1]];
  const Value& key = values_[p.items[2]];
  const Value& numel = values_[p.items[4]];
  if (type.kind != Kind::global || !type.s.starts_with("torch.") || !type.s.ends_with("Storage"))
    return fail("a storage whose type is " + std::string(kind_name(type.kind)) + " '" + type.s + "', not torch.<Type>Storage");
  const std::string type_name = type.s.substr(type.s.rfind('.') + 1);  // torch.storage.UntypedStorage too
  if (key.kind != Kind::text) return fail("a storage key that is " + std::string(kind_name(key.kind)) + ", not a str");
  if (numel.kind != Kind::integer || numel.i < 0) return fail("storage '" + key.s + "': its size is not a non-negative int");
  if (p.items.size() > 5 && values_[p.items[5]].kind != Kind::none)
    return unsupported(where_ + ": storage '" + key.s + "' is a view of another (torch < 0.4's view_metadata); "
                       "load and save the checkpoint again with a current torch");
  auto [it, fresh] = storage_by_key_.emplace(key.s, static_cast<int32_t>(storages_.size()));
  if (fresh) {
    storages_.push_back({type_name, key.s, numel.i});
  } else if (storages_[static_cast<size_t>(it->second)].type != type_name ||
             storages_[static_cast<size_t>(it->second)].numel != numel.i) {
    return fail("storage '" + key.s + "' appears with two types or sizes");
  }
  return make(Value{.kind = Kind::storage, .index = it->second});
}

Expected<Ref> Unpickler::rebuild_tensor(const std::vector<Ref>& args, const std::string& func) {
  // _rebuild_tensor(storage, storage_offset, size, stride) and _v2's (..., requires_grad,
  // backward_hooks[, metadata]): the hooks and grad flag do not change the data. _v3's (...,
  // backward_hooks, dtype[, metadata]) views an UntypedStorage's bytes as `dtype` (the float8
  // types, which have no storage class), its offset in elements of dtype.
  const bool v3 = func.ends_with("_v3");
  if (args.size() < (v3 ? 7u : 4u))
    return fail(func + " with " + std::to_string(args.size()) + " arguments (needs at least " + (v3 ? "7)" : "4)"));
  const Value& storage = values_[args[0]];
  if (storage.kind != Kind::storage) return fail(func + "'s first argument is " + kind_name(storage.kind) + ", not a storage");
  const Value& offset = values_[args[1]];
  if (offset.kind != Kind::integer || offset.i < 0) return fail(func + "'s storage offset is not a non-negative int");
  TensorInfo t;
  t.storage = storage.index;
  t.offset = offset.i;
  if (v3) {
    const Value& dtype = values_[args[6]];
    if (dtype.kind != Kind::global || !dtype.s.starts_with("torch.")) return fail(func + "'s dtype is not a torch dtype");
    t.dtype = dtype.s.substr(6);
  } else {
    t.dtype = storage_class_dtype(storages_[static_cast<size_t>(storage.index)].type);
    if (t.dtype.empty()) t.dtype = storages_[static_cast<size_t>(storage.index)].type;  // refused per tensor
  }
  BRIGADE_ASSIGN_OR_RETURN(t.sizes, int_tuple(args[2], func + "'s size"));
  BRIGADE_ASSIGN_OR_RETURN(t.strides, int_tuple(args[3], func + "'s stride"));
  if (t.sizes.size() != t.strides.size())
    return fail(func + " with " + std::to_string(t.sizes.size()) + " sizes but " + std::to_string(t.strides.size()) + " strides");
  tensors_.push_back(std::move(t));
  return make(Value{.kind = Kind::tensor, .index = static_cast<int32_t>(tensors_.size() - 1)});
}

Expected<Ref> Unpickler::call(Ref func_ref, Ref args_ref) {
  const Value& func = values_[func_ref];
  if (func.kind != Kind::global) return fail(std::string("REDUCE on ") + kind_name(func.kind) + ", not a callable global");
  const std::string name = func.s;
  const std::vector<Ref> args = values_[args_ref].items;
  if (values_[args_ref].kind != Kind::tuple) return fail("REDUCE of " + name + " with arguments that are not a tuple");
  if (name == "collections.OrderedDict") {
    const Ref d = make(Value{.kind = Kind::dict});
    if (args.empty()) return d;
    // OrderedDict(iterable of pairs)
    const Value& pairs = values_[args[0]];
    if (args.size() != 1 || (pairs.kind != Kind::list && pairs.kind != Kind::tuple))
      return fail("OrderedDict called with something other than a list of pairs");
    std::vector<Ref> kv;
    for (Ref p : pairs.items) {
      if ((values_[p].kind != Kind::tuple && values_[p].kind != Kind::list) || values_[p].items.size() != 2)
        return fail("OrderedDict called with an item that is not a pair");
      kv.insert(kv.end(), values_[p].items.begin(), values_[p].items.end());
    }
    BRIGADE_RETURN_IF_ERROR(set_items(d, kv));
    return d;
  }
  if (name == "torch._utils._rebuild_tensor" || name == "torch._utils._rebuild_tensor_v2" ||
      name == "torch._utils._rebuild_tensor_v3")
    return rebuild_tensor(args, name);
  if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
    if (args.empty() || values_[args[0]].kind != Kind::tensor) return fail(name + " of something other than a tensor");
    return args[0];
  }
  if (name == "torch._tensor._rebuild_from_type_v2") {
    // (func, type, args, state): func(*args) as `type`, which must be a plain tensor or parameter.
    if (args.size() < 3) return fail(name + " with fewer than 3 arguments");
    const Value& type = values_[args[1]];
    if (type.kind != Kind::global || (type.s != "torch.Tensor" && type.s != "torch.nn.parameter.Parameter"))
      return unsupported(where_ + ": a tensor of the subclass '" + type.s + "' (brigade reads plain tensors only)");
    BRIGADE_ASSIGN_OR_RETURN(Ref t, call(args[0], args[2]));
    if (values_[t].kind != Kind::tensor) return fail(name + " rebuilt something other than a tensor");
    return t;
  }
  if (name == "torch.Size") {
    if (args.size() != 1 || values_[args[0]].kind != Kind::tuple) return fail("torch.Size of something other than a tuple");
    return args[0];
  }
  if (name == "_codecs.encode") {
    // Protocol 2's bytes: _codecs.encode(str of code points < 256, 'latin1').
    if (args.size() != 2 || values_[args[0]].kind != Kind::text || values_[args[1]].kind != Kind::text ||
        (values_[args[1]].s != "latin1" && values_[args[1]].s != "latin-1"))
      return fail("_codecs.encode other than (str, 'latin1')");
    const std::string& u = values_[args[0]].s;
    std::string out;
    for (size_t k = 0; k < u.size();) {
      const auto c = static_cast<uint8_t>(u[k]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        k += 1;
      } else if ((c & 0xE0u) == 0xC0u && k + 1 < u.size() && c <= 0xC3u) {
        out.push_back(static_cast<char>(((c & 0x03u) << 6) | (static_cast<uint8_t>(u[k + 1]) & 0x3Fu)));
        k += 2;
      } else {
        return fail("_codecs.encode of a character outside latin1");
      }
    }
    return make(Value{.kind = Kind::bytes, .s = std::move(out)});
  }
  return unsupported(where_ + ": the pickle calls '" + name + "', which builds no tensor");
}

Status Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      BRIGADE_ASSIGN_OR_RETURN(uint8_t v, read<uint8_t>());
      if (v > 5) return unsupported(where_ + ": pickle protocol " + std::to_string(v) + " (brigade reads 0 to 5)");
      return Status::ok();
    }
    case 0x95: {  // FRAME: a length prefix only
      BRIGADE_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>());
      (void)n;
      return Status::ok();
    }
    case '.':  // STOP
      stopped_ = true;
      return Status::ok();
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return Status::ok();
    case '0': {  // POP
      if (!marks_.empty() && stack_.size() == marks_.back()) return pop_mark().status();
      return pop().status();
    }
    case '1':  // POP_MARK
      return pop_mark().status();
    case '2': {  // DUP
      BRIGADE_ASSIGN_OR_RETURN(Ref r, top());
      push(r);
      return Status::ok();
    }
    case 'N':  // NONE
      push(make(Value{}));
      return Status::ok();
    case 0x88: case 0x89:  // NEWTRUE, NEWFALSE
      push(make(Value{.kind = Kind::boolean, .i = op == 0x88 ? 1 : 0}));
      return Status::ok();
    case 'J': {  // BININT
      BRIGADE_ASSIGN_OR_RETURN(int32_t v, read<int32_t>());
      push(make_int(v));
      return Status::ok();
    }
    case 'K': {  // BININT1
      BRIGADE_ASSIGN_OR_RETURN(uint8_t v, read<uint8_t>());
      push(make_int(v));
      return Status::ok();
    }
    case 'M': {  // BININT2
      BRIGADE_ASSIGN_OR_RETURN(uint16_t v, read<uint16_t>());
      push(make_int(v));
      return Status::ok();
    }
    case 'I': {  // INT (text); I00 / I01 are False / True
      const size_t at = pos_;
      BRIGADE_ASSIGN_OR_RETURN(int64_t v, read_decimal());
      const bool flag = pos_ - at == 3 && data_[at] == '0';
      push(flag ? make(Value{.kind = Kind::boolean, .i = v}) : make_int(v));
      return Status::ok();
    }
    case 'L': {  // LONG (text)
      BRIGADE_ASSIGN_OR_RETURN(int64_t v, read_decimal());
      push(make_int(v));
      return Status::ok();
    }
    case 0x8a: {  // LONG1
      BRIGADE_ASSIGN_OR_RETURN(uint8_t n, read<uint8_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string b, read_bytes(n));
      return push_long(std::move(b));
    }
    case 0x8b: {  // LONG4
      BRIGADE_ASSIGN_OR_RETURN(int32_t n, read<int32_t>());
      if (n < 0) return fail("LONG4 with a negative length");
      BRIGADE_ASSIGN_OR_RETURN(std::string b, read_bytes(static_cast<uint64_t>(n)));
      return push_long(std::move(b));
    }
    case 'G': {  // BINFLOAT: big-endian double
      BRIGADE_ASSIGN_OR_RETURN(uint64_t be, read<uint64_t>());
      push(make(Value{.kind = Kind::floating, .f = std::bit_cast<double>(__builtin_bswap64(be))}));
      return Status::ok();
    }
    case 'X': {  // BINUNICODE
      BRIGADE_ASSIGN_OR_RETURN(uint32_t n, read<uint32_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_text(std::move(s));
    }
    case 0x8c: {  // SHORT_BINUNICODE
      BRIGADE_ASSIGN_OR_RETURN(uint8_t n, read<uint8_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_text(std::move(s));
    }
    case 0x8d: {  // BINUNICODE8
      BRIGADE_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_text(std::move(s));
    }
    case 'T': {  // BINSTRING (Python 2 str)
      BRIGADE_ASSIGN_OR_RETURN(int32_t n, read<int32_t>());
      if (n < 0) return fail("BINSTRING with a negative length");
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(static_cast<uint64_t>(n)));
      return push_text(std::move(s));
    }
    case 'U': {  // SHORT_BINSTRING
      BRIGADE_ASSIGN_OR_RETURN(uint8_t n, read<uint8_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_text(std::move(s));
    }
    case 'B': {  // BINBYTES
      BRIGADE_ASSIGN_OR_RETURN(uint32_t n, read<uint32_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_bytes(std::move(s));
    }
    case 'C': {  // SHORT_BINBYTES
      BRIGADE_ASSIGN_OR_RETURN(uint8_t n, read<uint8_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_bytes(std::move(s));
    }
    case 0x8e: case 0x96: {  // BINBYTES8, BYTEARRAY8
      BRIGADE_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>());
      BRIGADE_ASSIGN_OR_RETURN(std::string s, read_bytes(n));
      return push_bytes(std::move(s));
    }
    case ')':  // EMPTY_TUPLE
      push(make(Value{.kind = Kind::tuple}));
      return Status::ok();
    case 't': {  // TUPLE
      BRIGADE_ASSIGN_OR_RETURN(auto items, pop_mark());
      push(make(Value{.kind = Kind::tuple, .items = std::move(items)}));
      return Status::ok();
    }
    case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
      std::vector<Ref> items(static_cast<size_t>(op - 0x84));
      for (size_t k = items.size(); k-- > 0;) {
        BRIGADE_ASSIGN_OR_RETURN(items[k], pop());
      }
      push(make(Value{.kind = Kind::tuple, .items = std::move(items)}));
      return Status::ok();
    }
    case ']': case 0x8f:  // EMPTY_LIST, EMPTY_SET (a set is read as a list)
      push(make(Value{.kind = Kind::list}));
      return Status::ok();
    case 'l': case 0x91: {  // LIST, FROZENSET
      BRIGADE_ASSIGN_OR_RETURN(auto items, pop_mark());
      push(make(Value{.kind = Kind::list, .items = std::move(items)}));
      return Status::ok();
    }
    case 'a': {  // APPEND
      BRIGADE_ASSIGN_OR_RETURN(Ref item, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref list, top());
      return add_items(list, {item});
    }
    case 'e': case 0x90: {  // APPENDS, ADDITEMS
      BRIGADE_ASSIGN_OR_RETURN(auto items, pop_mark());
      BRIGADE_ASSIGN_OR_RETURN(Ref list, top());
      return add_items(list, items);
    }
    case '}':  // EMPTY_DICT
      push(make(Value{.kind = Kind::dict}));
      return Status::ok();
    case 'd': {  // DICT
      BRIGADE_ASSIGN_OR_RETURN(auto items, pop_mark());
      const Ref d = make(Value{.kind = Kind::dict});
      BRIGADE_RETURN_IF_ERROR(set_items(d, items));
      push(d);
      return Status::ok();
    }
    case 's': {  // SETITEM
      BRIGADE_ASSIGN_OR_RETURN(Ref v, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref k, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref d, top());
      return set_items(d, {k, v});
    }
    case 'u': {  // SETITEMS
      BRIGADE_ASSIGN_OR_RETURN(auto items, pop_mark());
      BRIGADE_ASSIGN_OR_RETURN(Ref d, top());
      return set_items(d, items);
    }
    case 'q': {  // BINPUT
      BRIGADE_ASSIGN_OR_RETURN(uint8_t i, read<uint8_t>());
      return memo_put(i);
    }
    case 'r': {  // LONG_BINPUT
      BRIGADE_ASSIGN_OR_RETURN(uint32_t i, read<uint32_t>());
      return memo_put(i);
    }
    case 'p': {  // PUT (text)
      BRIGADE_ASSIGN_OR_RETURN(int64_t i, read_decimal());
      if (i < 0) return fail("PUT with a negative index");
      return memo_put(static_cast<uint64_t>(i));
    }
    case 0x94:  // MEMOIZE
      return memo_put(memo_.size());
    case 'h': {  // BINGET
      BRIGADE_ASSIGN_OR_RETURN(uint8_t i, read<uint8_t>());
      return memo_get(i);
    }
    case 'j': {  // LONG_BINGET
      BRIGADE_ASSIGN_OR_RETURN(uint32_t i, read<uint32_t>());
      return memo_get(i);
    }
    case 'g': {  // GET (text)
      BRIGADE_ASSIGN_OR_RETURN(int64_t i, read_decimal());
      if (i < 0) return fail("GET with a negative index");
      return memo_get(static_cast<uint64_t>(i));
    }
    case 'c': {  // GLOBAL "module\nname\n"
      BRIGADE_ASSIGN_OR_RETURN(std::string module, read_line());
      BRIGADE_ASSIGN_OR_RETURN(std::string name, read_line());
      return push_global(module, name);
    }
    case 0x93: {  // STACK_GLOBAL
      BRIGADE_ASSIGN_OR_RETURN(Ref name, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref module, pop());
      if (values_[name].kind != Kind::text || values_[module].kind != Kind::text)
        return fail("STACK_GLOBAL of something other than two strs");
      return push_global(values_[module].s, values_[name].s);
    }
    case 'R': {  // REDUCE
      BRIGADE_ASSIGN_OR_RETURN(Ref args, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref func, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref r, call(func, args));
      push(r);
      return Status::ok();
    }
    case 0x81: case 0x92: {  // NEWOBJ, NEWOBJ_EX: cls.__new__(cls, *args): OrderedDict only
      if (op == 0x92) BRIGADE_RETURN_IF_ERROR(pop().status());  // kwargs
      BRIGADE_RETURN_IF_ERROR(pop().status());                 // args
      BRIGADE_ASSIGN_OR_RETURN(Ref cls, pop());
      if (values_[cls].kind != Kind::global || values_[cls].s != "collections.OrderedDict")
        return unsupported(where_ + ": the pickle builds an object of '" + values_[cls].s + "', which a tensor state dict does not");
      push(make(Value{.kind = Kind::dict}));
      return Status::ok();
    }
    case 'b': {  // BUILD: an OrderedDict's attributes (_metadata), a parameter's state: not data
      BRIGADE_ASSIGN_OR_RETURN(Ref state, pop());
      (void)state;
      BRIGADE_ASSIGN_OR_RETURN(Ref obj, top());
      if (values_[obj].kind != Kind::dict && values_[obj].kind != Kind::tensor)
        return fail(std::string("BUILD on ") + kind_name(values_[obj].kind));
      return Status::ok();
    }
    case 'Q': {  // BINPERSID
      BRIGADE_ASSIGN_OR_RETURN(Ref pid, pop());
      BRIGADE_ASSIGN_OR_RETURN(Ref s, persistent_load(pid));
      push(s);
      return Status::ok();
    }
    case 'P':  // PERSID (text ids: not torch's)
      return unsupported(where_ + ": a text persistent id (PERSID); torch.save writes BINPERSID");
    case 'i': case 'o': case 0x82: case 0x83: case 0x84: case 0x97: case 0x98:  // INST, OBJ, EXT1-4, buffers
      return unsupported(where_ + ": pickle opcode " + hex_byte(op) + " builds objects a tensor state dict does not hold");
    case 'F': case 'S': case 'V':  // protocol-0 FLOAT, STRING, UNICODE
      return unsupported(where_ + ": protocol-0 text opcode '" + std::string(1, static_cast<char>(op)) +
                         "' (torch.save writes protocol 2)");
    default:
      return fail("unknown opcode " + hex_byte(op) + " (not a pickle, or a corrupt one)");
  }
}

Expected<Ref> Unpickler::run() {
  while (!stopped_) {
    op_at_ = pos_;
    BRIGADE_ASSIGN_OR_RETURN(uint8_t op, read<uint8_t>());
    BRIGADE_RETURN_IF_ERROR(step(op));
  }
  if (!marks_.empty()) return fail("STOP with an open MARK");
  if (stack_.size() != 1) return fail("STOP with " + std::to_string(stack_.size()) + " values on the stack (needs 1)");
  return stack_.back();
}

// The records of a state dict whose root is `root`.
Expected<std::vector<TorchTensorRecord>> state_dict_records(const Unpickler& u, Ref root, const std::string& where) {
  const Value& d = u.at(root);
  if (d.kind != Kind::dict)
    return corrupt(where + ": the pickle holds " + kind_name(d.kind) + ", not a state dict {name: tensor}");
  std::vector<TorchTensorRecord> out;
  std::string other_keys;
  for (size_t k = 0; k + 1 < d.items.size(); k += 2) {
    const Value& key = u.at(d.items[k]);
    const Value& v = u.at(d.items[k + 1]);
    if (key.kind != Kind::text) return corrupt(where + ": a state dict key that is " + kind_name(key.kind) + ", not a str");
    if (v.kind != Kind::tensor) {  // _extra_state and the like: not weights
      if (other_keys.size() < 200) other_keys += (other_keys.empty() ? "" : ", ") + key.s;
      continue;
    }
    const TensorInfo& t = u.tensors()[static_cast<size_t>(v.index)];
    const StorageInfo& s = u.storages()[static_cast<size_t>(t.storage)];
    out.push_back({key.s, t.dtype, s.type, s.key, s.numel, t.offset, t.sizes, t.strides});
  }
  if (out.empty())
    return corrupt(where + ": the state dict holds no tensors" +
                   (other_keys.empty() ? std::string() : " (its keys: " + other_keys + ")") +
                   "; brigade reads a flat {name: tensor} dict as transformers saves it");
  return out;
}

// ---- From records to RawTensors ------------------------------------------------------------

struct StoredType {
  DType dtype;         // as brigade holds it
  size_t stored_size;  // bytes per element in the file
};

// A torch dtype as brigade holds it; unsupported (naming `where`) for the others.
Expected<StoredType> stored_type(const std::string& dtype, const std::string& where) {
  static const std::map<std::string, StoredType> kTypes = {
      {"float32", {DType::f32, 4}}, {"float16", {DType::f16, 2}}, {"bfloat16", {DType::bf16, 2}},
      {"float64", {DType::f32, 8}}, {"int64", {DType::i64, 8}},   {"int32", {DType::i32, 4}},
      {"int8", {DType::i8, 1}},     {"uint8", {DType::u8, 1}},    {"bool", {DType::u8, 1}},
      {"float8_e4m3fn", {DType::f8e4m3, 1}}};
  auto it = kTypes.find(dtype);
  if (it == kTypes.end())
    return unsupported(where + ": dtype " + dtype +
                       " is not supported; supported: float32, float16, bfloat16, float64 (read as float32), int64, "
                       "int32, int8, uint8, bool, float8_e4m3fn");
  return it->second;
}

// Bytes per element of a storage of class `cls` (UntypedStorage: bytes).
Expected<size_t> storage_element_size(const std::string& cls, const std::string& where) {
  if (cls == "UntypedStorage") return size_t{1};
  const std::string dtype = storage_class_dtype(cls);
  if (dtype.empty()) return unsupported(where + ": storage type " + cls + " is not supported");
  BRIGADE_ASSIGN_OR_RETURN(StoredType st, stored_type(dtype, where));
  return st.stored_size;
}

Status build_tensor(const TorchTensorRecord& r, std::span<const uint8_t> storage, const std::string& path,
                    std::map<std::string, RawTensor>& out, std::vector<std::vector<uint8_t>>& derived) {
  const std::string where = path + ": tensor '" + r.name + "'";
  BRIGADE_ASSIGN_OR_RETURN(StoredType st, stored_type(r.dtype, where));
  BRIGADE_ASSIGN_OR_RETURN(size_t element, storage_element_size(r.storage_type, where));
  // (The division first: a forged element count must not wrap the product onto the real size.)
  if (r.storage_numel < 0 || storage.size() % element != 0 || storage.size() / element != static_cast<uint64_t>(r.storage_numel))
    return corrupt(where + ": its storage '" + r.storage_key + "' holds " + std::to_string(storage.size()) +
                   " bytes but is " + std::to_string(r.storage_numel) + " x " + std::to_string(element) +
                   " bytes (truncated or corrupt file)");
  // The view's bounds in elements of its dtype (an UntypedStorage's are bytes).
  const int64_t storage_numel = r.storage_numel * static_cast<int64_t>(element) / static_cast<int64_t>(st.stored_size);
  RawTensor t;
  t.name = r.name;
  t.file = path;
  t.dtype = st.dtype;
  if (r.sizes.size() > 8) return unsupported(where + ": " + std::to_string(r.sizes.size()) + " dimensions (at most 8 supported)");
  uint64_t numel = 1;
  bool contiguous = true;
  uint64_t expected_stride = 1;
  for (size_t d = r.sizes.size(); d-- > 0;) {
    const uint64_t n = static_cast<uint64_t>(r.sizes[d]);
    if (n > (1ull << 40) || (n != 0 && numel > (1ull << 40) / n)) return corrupt(where + ": shape is implausibly large");
    numel *= n;
    if (n > 1 && static_cast<uint64_t>(r.strides[d]) != expected_stride) contiguous = false;
    expected_stride *= n;
  }
  for (size_t d = 0; d < r.sizes.size(); ++d) {
    if (t.shape.size() < static_cast<size_t>(kMaxDims)) t.shape.push_back(r.sizes[d]);
    else t.shape.back() *= r.sizes[d];  // dimensions past the fourth fold into it, as in safetensors.cpp
  }
  if (numel > 0) {  // the highest element the view reaches must lie in the storage
    const auto cap = static_cast<uint64_t>(storage_numel);
    uint64_t last = static_cast<uint64_t>(r.offset);
    bool inside = last < cap;
    for (size_t d = 0; d < r.sizes.size() && inside; ++d) {
      const uint64_t span = static_cast<uint64_t>(r.sizes[d]) - 1, stride = static_cast<uint64_t>(r.strides[d]);
      inside = stride == 0 || span <= (cap - 1 - last) / stride;  // last + span * stride <= cap - 1
      if (inside) last += span * stride;
    }
    if (!inside)
      return corrupt(where + ": its view (offset " + std::to_string(r.offset) + ", shape " + t.shape_string() +
                     ") runs past its storage '" + r.storage_key + "' of " + std::to_string(storage_numel) + " elements");
  }
  if (numel == 0) {
    out.emplace(t.name, std::move(t));
    return Status::ok();
  }
  const size_t out_size = dtype_size(st.dtype);
  const uint8_t* src = storage.data();
  const bool convert = st.stored_size != out_size;  // float64 -> f32
  const bool aligned = reinterpret_cast<uintptr_t>(src + r.offset * st.stored_size) % out_size == 0;
  if (contiguous && !convert && aligned) {
    t.bytes = storage.subspan(static_cast<size_t>(r.offset) * out_size, static_cast<size_t>(numel) * out_size);
  } else {
    std::vector<uint8_t>& buf = derived.emplace_back(static_cast<size_t>(numel) * out_size);
    std::vector<int64_t> idx(r.sizes.size(), 0);
    uint64_t at = static_cast<uint64_t>(r.offset);
    for (uint64_t e = 0; e < numel; ++e) {
      const uint8_t* from = src + at * st.stored_size;
      if (convert) {
        double v;
        std::memcpy(&v, from, 8);
        const auto f = static_cast<float>(v);
        std::memcpy(buf.data() + e * 4, &f, 4);
      } else {
        std::memcpy(buf.data() + e * out_size, from, out_size);
      }
      for (size_t d = r.sizes.size(); d-- > 0;) {  // odometer over the view's indices
        at += static_cast<uint64_t>(r.strides[d]);
        if (++idx[d] < r.sizes[d]) break;
        at -= static_cast<uint64_t>(r.strides[d]) * static_cast<uint64_t>(r.sizes[d]);
        idx[d] = 0;
      }
    }
    t.bytes = std::span<const uint8_t>(buf.data(), buf.size());
  }
  out.emplace(t.name, std::move(t));
  return Status::ok();
}

Status add_tensors(const std::vector<TorchTensorRecord>& records,
                   const std::map<std::string, std::span<const uint8_t>>& storages, const std::string& path,
                   std::map<std::string, RawTensor>& out, std::vector<std::vector<uint8_t>>& derived) {
  for (const auto& r : records) {
    if (out.count(r.name)) return corrupt(path + ": tensor '" + r.name + "' appears twice in the checkpoint");
    auto it = storages.find(r.storage_key);
    if (it == storages.end())
      return corrupt(path + ": tensor '" + r.name + "': its storage '" + r.storage_key + "' is not in the file");
    BRIGADE_RETURN_IF_ERROR(build_tensor(r, it->second, path, out, derived));
  }
  return Status::ok();
}

Status read_zip_container(const MappedFile& file, std::map<std::string, RawTensor>& out,
                          std::vector<std::vector<uint8_t>>& derived) {
  const std::string& path = file.path();
  BRIGADE_ASSIGN_OR_RETURN(auto entries, read_zip_entries(file));
  // <archive>/data.pkl, the archive's name being whatever the writer chose (the file's stem).
  std::string prefix;
  for (const auto& [name, e] : entries) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.substr(slash + 1) == "data.pkl") {
      prefix = name.substr(0, slash + 1);
      break;
    }
  }
  if (prefix.empty())
    return corrupt(path + ": a ZIP archive without <archive>/data.pkl: not a torch.save checkpoint");
  if (auto bo = entries.find(prefix + "byteorder"); bo != entries.end()) {
    BRIGADE_ASSIGN_OR_RETURN(auto b, file.bytes(bo->second.offset, bo->second.size, "byteorder"));
    if (std::string(b.begin(), b.end()) != "little")
      return unsupported(path + ": saved with byteorder '" + std::string(b.begin(), b.end()) +
                         "' (brigade reads little-endian checkpoints)");
  }
  const ZipEntry& pkl = entries.at(prefix + "data.pkl");
  BRIGADE_ASSIGN_OR_RETURN(auto pickle, file.bytes(pkl.offset, pkl.size, "data.pkl"));
  BRIGADE_ASSIGN_OR_RETURN(auto records, unpickle_state_dict(pickle, path + ": " + prefix + "data.pkl"));
  std::map<std::string, std::span<const uint8_t>> storages;
  for (const auto& r : records) {
    if (storages.count(r.storage_key)) continue;
    auto e = entries.find(prefix + "data/" + r.storage_key);
    if (e == entries.end())
      return corrupt(path + ": tensor '" + r.name + "': its storage record " + prefix + "data/" + r.storage_key +
                     " is missing from the archive");
    BRIGADE_ASSIGN_OR_RETURN(auto bytes, file.bytes(e->second.offset, e->second.size, "storage " + r.storage_key));
    storages.emplace(r.storage_key, bytes);
  }
  return add_tensors(records, storages, path, out, derived);
}

// torch < 1.6's stream: magic, protocol, sys_info, the state dict, the keys, then the storages.
Status read_legacy_container(const MappedFile& file, std::map<std::string, RawTensor>& out,
                             std::vector<std::vector<uint8_t>>& derived) {
  const std::string& path = file.path();
  std::span<const uint8_t> rest(file.data(), file.size());
  auto next_pickle = [&](const std::string& what) -> Expected<std::pair<std::unique_ptr<Unpickler>, Ref>> {
    auto u = std::make_unique<Unpickler>(rest, path + ": " + what);
    BRIGADE_ASSIGN_OR_RETURN(Ref root, u->run());
    rest = rest.subspan(u->consumed());
    return std::make_pair(std::move(u), root);
  };
  {
    BRIGADE_ASSIGN_OR_RETURN(auto magic, next_pickle("legacy magic number"));
    static const std::string kMagic = {'\x6c', '\xfc', '\x9c', '\x46', '\xf9', '\x20', '\x6a', '\xa8', '\x50', '\x19'};
    const Value& v = magic.first->at(magic.second);
    if (v.kind != Kind::big_integer || v.s != kMagic) return corrupt(path + ": not a torch.save file (wrong magic number)");
  }
  {
    BRIGADE_ASSIGN_OR_RETURN(auto proto, next_pickle("legacy protocol version"));
    const Value& v = proto.first->at(proto.second);
    if (v.kind != Kind::integer || v.i != 1001)
      return unsupported(path + ": legacy torch.save protocol " + (v.kind == Kind::integer ? std::to_string(v.i) : "?") +
                         " (brigade reads 1001)");
  }
  {
    BRIGADE_ASSIGN_OR_RETURN(auto info, next_pickle("legacy sys_info"));
    const Value& v = info.first->at(info.second);
    if (v.kind != Kind::dict) return corrupt(path + ": legacy sys_info is not a dict");
    for (size_t k = 0; k + 1 < v.items.size(); k += 2) {
      const Value& key = info.first->at(v.items[k]);
      const Value& val = info.first->at(v.items[k + 1]);
      if (key.kind == Kind::text && key.s == "little_endian" && !(val.kind == Kind::boolean && val.i == 1))
        return unsupported(path + ": saved on a big-endian machine (brigade reads little-endian checkpoints)");
    }
  }
  size_t consumed = 0;
  BRIGADE_ASSIGN_OR_RETURN(auto records, unpickle_state_dict(rest, path + ": legacy state dict", &consumed));
  rest = rest.subspan(consumed);
  std::vector<std::string> keys;
  {
    BRIGADE_ASSIGN_OR_RETURN(auto list, next_pickle("legacy storage keys"));
    const Value& v = list.first->at(list.second);
    if (v.kind != Kind::list) return corrupt(path + ": the legacy storage key list is not a list");
    for (Ref k : v.items) {
      if (list.first->at(k).kind != Kind::text) return corrupt(path + ": a legacy storage key that is not a str");
      keys.push_back(list.first->at(k).s);
    }
  }
  // Each storage's element size comes from the records that use it.
  std::map<std::string, const TorchTensorRecord*> by_key;
  for (const auto& r : records) by_key.emplace(r.storage_key, &r);
  std::map<std::string, std::span<const uint8_t>> storages;
  for (const auto& key : keys) {
    auto it = by_key.find(key);
    if (it == by_key.end())
      return unsupported(path + ": legacy storage '" + key + "' is used by no tensor of the state dict, so its element "
                         "size is unknown");
    BRIGADE_ASSIGN_OR_RETURN(size_t element, storage_element_size(it->second->storage_type,
                                                                path + ": tensor '" + it->second->name + "'"));
    if (rest.size() < 8) return corrupt(path + ": legacy storage '" + key + "': truncated before its size");
    uint64_t numel = 0;
    std::memcpy(&numel, rest.data(), 8);
    if (numel != static_cast<uint64_t>(it->second->storage_numel))
      return corrupt(path + ": legacy storage '" + key + "' says " + std::to_string(numel) + " elements, its id " +
                     std::to_string(it->second->storage_numel));
    if (numel > (rest.size() - 8) / element)
      return corrupt(path + ": legacy storage '" + key + "': " + std::to_string(numel) + " elements run past the end of "
                     "the file (truncated?)");
    storages.emplace(key, rest.subspan(8, static_cast<size_t>(numel * element)));
    rest = rest.subspan(8 + static_cast<size_t>(numel * element));
  }
  return add_tensors(records, storages, path, out, derived);
}

}  // namespace

Expected<std::vector<TorchTensorRecord>> unpickle_state_dict(std::span<const uint8_t> pickle, const std::string& where,
                                                             size_t* consumed) {
  Unpickler u(pickle, where);
  BRIGADE_ASSIGN_OR_RETURN(Ref root, u.run());
  if (consumed != nullptr) *consumed = u.consumed();
  return state_dict_records(u, root, where);
}

Status read_torch_checkpoint(const std::shared_ptr<MappedFile>& file, std::map<std::string, RawTensor>& out,
                             std::vector<std::vector<uint8_t>>& derived) {
  const std::span<const uint8_t> head(file->data(), std::min<size_t>(file->size(), 512));
  if (looks_like_zip(head)) return read_zip_container(*file, out, derived);
  if (head.size() >= 4 && head[0] == 0x80 && head[2] == 0x8a && head[3] == 10)  // PROTO n, LONG1 of 10 bytes
    return read_legacy_container(*file, out, derived);
  if (head.size() >= 262 && std::memcmp(head.data() + 257, "ustar", 5) == 0)
    return unsupported(file->path() + ": a tar-format torch checkpoint (torch < 0.4); load and save it again with a "
                       "current torch");
  return corrupt(file->path() + ": not a torch.save checkpoint (neither a ZIP archive nor the legacy stream)");
}

std::string weights_file_path(const std::string& dir, const std::string& safetensors_name, const std::string& torch_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path st = fs::path(dir) / safetensors_name;
  return (fs::exists(st, ec) ? st : fs::path(dir) / torch_name).string();
}

Expected<std::shared_ptr<MappedFile>> read_weights_file(const std::string& dir, const std::string& safetensors_name,
                                                        const std::string& torch_name,
                                                        std::map<std::string, RawTensor>& out,
                                                        std::vector<std::vector<uint8_t>>& derived) {
  const std::string path = weights_file_path(dir, safetensors_name, torch_name);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return not_found(dir + ": no " + safetensors_name + " or " + torch_name + " in the directory");
  BRIGADE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  if (path.ends_with(".safetensors")) {
    BRIGADE_RETURN_IF_ERROR(read_safetensors(file, out));
  } else {
    BRIGADE_RETURN_IF_ERROR(read_torch_checkpoint(file, out, derived));
  }
  return file;
}

}  // namespace brigade
