// ReadPickle: the pickle machine's stack, mark stack and memo over the
// binary opcodes, each operand bounds-checked before it is read. Values
// live in the PickleDocument, so a value shared through the memo (or a
// cycle) is one node.
#include "common/checkpoint/pickle_reader.h"

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zshard::checkpoint {

const char* PickleKindName(PickleValue::Kind kind) {
  switch (kind) {
    case PickleValue::Kind::kNone:
      return "None";
    case PickleValue::Kind::kBool:
      return "bool";
    case PickleValue::Kind::kInt:
      return "int";
    case PickleValue::Kind::kFloat:
      return "float";
    case PickleValue::Kind::kString:
      return "str";
    case PickleValue::Kind::kTuple:
      return "tuple";
    case PickleValue::Kind::kList:
      return "list";
    case PickleValue::Kind::kDict:
      return "dict";
    case PickleValue::Kind::kGlobal:
      return "global";
    case PickleValue::Kind::kCall:
      return "call";
    case PickleValue::Kind::kPersistentId:
      return "persistent id";
  }
  return "value";
}

namespace {

using Kind = PickleValue::Kind;

class Machine {
 public:
  Machine(absl::string_view bytes, absl::string_view what)
      : bytes_(bytes), what_(what) {}

  absl::StatusOr<PickleDocument> Run() {
    while (true) {
      if (at_ >= bytes_.size()) return Damaged("ends before STOP");
      op_at_ = at_;
      const uint8_t op = static_cast<uint8_t>(bytes_[at_++]);
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty()) {
          return Damaged("STOP with a stack that is not one value");
        }
        doc_.set_root(stack_.back());
        return std::move(doc_);
      }
      absl::Status s = Step(op);
      if (!s.ok()) return s;
    }
  }

 private:
  absl::Status Damaged(absl::string_view why) const {
    return absl::DataLossError(
        absl::StrCat(what_, ": damaged pickle: ", why, " at byte ", op_at_));
  }

  // Takes `n` operand bytes.
  absl::StatusOr<absl::string_view> Take(uint64_t n) {
    if (n > bytes_.size() - at_) return Damaged("truncated operand");
    absl::string_view out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }

  template <typename T>
  absl::StatusOr<T> TakeLe() {
    absl::StatusOr<absl::string_view> b = Take(sizeof(T));
    if (!b.ok()) return b.status();
    T value;
    std::memcpy(&value, b->data(), sizeof(T));
    return value;
  }

  // A line ending in '\n' (GLOBAL's operands).
  absl::StatusOr<std::string> TakeLine() {
    const size_t end = bytes_.find('\n', at_);
    if (end == absl::string_view::npos) return Damaged("unterminated line");
    std::string out(bytes_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }

  absl::StatusOr<PickleValue*> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Damaged("pop from an empty stack");
    }
    PickleValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }

  absl::StatusOr<PickleValue*> Top() {
    if (stack_.empty()) return Damaged("the stack is empty");
    return stack_.back();
  }

  // The values above the last mark, which is dropped.
  absl::StatusOr<std::vector<PickleValue*>> PopMark() {
    if (marks_.empty()) return Damaged("no MARK");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue*> out(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return out;
  }

  void Push(PickleValue* v) { stack_.push_back(v); }

  PickleValue* Scalar(Kind kind) { return doc_.New(kind); }

  absl::Status PushInt(int64_t value) {
    PickleValue* v = doc_.New(Kind::kInt);
    v->integer = value;
    Push(v);
    return absl::OkStatus();
  }

  absl::Status PushString(uint64_t n) {
    absl::StatusOr<absl::string_view> b = Take(n);
    if (!b.ok()) return b.status();
    PickleValue* v = doc_.New(Kind::kString);
    v->text = std::string(*b);
    Push(v);
    return absl::OkStatus();
  }

  // LONG1 / LONG4: little-endian two's complement of `n` bytes.
  absl::Status PushLong(uint64_t n) {
    if (n > 8) return Unsupported("an integer wider than 64 bits");
    absl::StatusOr<absl::string_view> b = Take(n);
    if (!b.ok()) return b.status();
    uint64_t u = 0;
    for (uint64_t i = 0; i < n; ++i) {
      u |= uint64_t{static_cast<uint8_t>((*b)[i])} << (8 * i);
    }
    if (n > 0 && n < 8 && (static_cast<uint8_t>((*b)[n - 1]) & 0x80) != 0) {
      u |= ~uint64_t{0} << (8 * n);  // sign-extend
    }
    return PushInt(static_cast<int64_t>(u));
  }

  absl::Status Unsupported(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": the pickle holds ", what, " at byte ", op_at_));
  }

  absl::Status Memo(uint64_t index) {
    absl::StatusOr<PickleValue*> top = Top();
    if (!top.ok()) return top.status();
    memo_[index] = *top;
    return absl::OkStatus();
  }

  absl::Status Recall(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) {
      return Damaged(absl::StrCat("memo entry ", index, " is not set"));
    }
    Push(it->second);
    return absl::OkStatus();
  }

  absl::Status Tuple(std::vector<PickleValue*> items) {
    PickleValue* t = doc_.New(Kind::kTuple);
    t->items = std::move(items);
    Push(t);
    return absl::OkStatus();
  }

  absl::Status SetItems(PickleValue* dict, std::vector<PickleValue*> kv) {
    if (dict->kind != Kind::kDict) {
      return Damaged(absl::StrCat("SETITEM on a ", PickleKindName(dict->kind)));
    }
    if (kv.size() % 2 != 0) return Damaged("SETITEMS with an odd count");
    // A key given twice stays twice here; the interpreter refuses it.
    for (size_t i = 0; i < kv.size(); i += 2) {
      dict->dict.emplace_back(kv[i], kv[i + 1]);
    }
    return absl::OkStatus();
  }

  absl::Status Appends(PickleValue* list, std::vector<PickleValue*> items) {
    if (list->kind != Kind::kList) {
      return Damaged(absl::StrCat("APPEND on a ", PickleKindName(list->kind)));
    }
    list->items.insert(list->items.end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  absl::Status Call(PickleValue* callable, PickleValue* args) {
    if (args->kind != Kind::kTuple) {
      return Damaged("REDUCE with arguments that are not a tuple");
    }
    // collections.OrderedDict() is the state_dict itself: a dict that the
    // SETITEMS after it fill.
    if (callable->IsGlobal("collections", "OrderedDict") &&
        args->items.empty()) {
      Push(doc_.New(Kind::kDict));
      return absl::OkStatus();
    }
    PickleValue* call = doc_.New(Kind::kCall);
    call->callable = callable;
    call->args = args;
    Push(call);
    return absl::OkStatus();
  }

  absl::Status Step(uint8_t op);

  absl::string_view bytes_;
  absl::string_view what_;
  size_t at_ = 0;
  size_t op_at_ = 0;
  PickleDocument doc_;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue*> memo_;
};

#define ZSHARD_TAKE_(type, name)                   \
  absl::StatusOr<type> name##_or = TakeLe<type>(); \
  if (!name##_or.ok()) return name##_or.status();  \
  const type name = *name##_or

#define ZSHARD_POP_(name)                         \
  absl::StatusOr<PickleValue*> name##_or = Pop(); \
  if (!name##_or.ok()) return name##_or.status(); \
  PickleValue* name = *name##_or

absl::Status Machine::Step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      ZSHARD_TAKE_(uint8_t, version);
      if (version > 5) {
        return Unsupported(absl::StrCat("pickle protocol ", version));
      }
      return absl::OkStatus();
    }
    case 0x95: {  // FRAME: a length only; the opcodes follow as usual
      ZSHARD_TAKE_(uint64_t, frame);
      (void)frame;
      return absl::OkStatus();
    }
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case ')':  // EMPTY_TUPLE
      return Tuple({});
    case '}':  // EMPTY_DICT
      Push(doc_.New(Kind::kDict));
      return absl::OkStatus();
    case ']':  // EMPTY_LIST
      Push(doc_.New(Kind::kList));
      return absl::OkStatus();
    case 't': {  // TUPLE
      absl::StatusOr<std::vector<PickleValue*>> items = PopMark();
      if (!items.ok()) return items.status();
      return Tuple(*std::move(items));
    }
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      std::vector<PickleValue*> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) {
        ZSHARD_POP_(v);
        items[i] = v;
      }
      return Tuple(std::move(items));
    }
    case 'l': {  // LIST
      absl::StatusOr<std::vector<PickleValue*>> items = PopMark();
      if (!items.ok()) return items.status();
      PickleValue* list = doc_.New(Kind::kList);
      list->items = *std::move(items);
      Push(list);
      return absl::OkStatus();
    }
    case 'd': {  // DICT
      absl::StatusOr<std::vector<PickleValue*>> kv = PopMark();
      if (!kv.ok()) return kv.status();
      PickleValue* dict = doc_.New(Kind::kDict);
      Push(dict);
      return SetItems(dict, *std::move(kv));
    }
    case 'a': {  // APPEND
      ZSHARD_POP_(item);
      ZSHARD_POP_(list);
      Push(list);
      return Appends(list, {item});
    }
    case 'e': {  // APPENDS
      absl::StatusOr<std::vector<PickleValue*>> items = PopMark();
      if (!items.ok()) return items.status();
      absl::StatusOr<PickleValue*> list = Top();
      if (!list.ok()) return list.status();
      return Appends(*list, *std::move(items));
    }
    case 's': {  // SETITEM
      ZSHARD_POP_(value);
      ZSHARD_POP_(key);
      ZSHARD_POP_(dict);
      Push(dict);
      return SetItems(dict, {key, value});
    }
    case 'u': {  // SETITEMS
      absl::StatusOr<std::vector<PickleValue*>> kv = PopMark();
      if (!kv.ok()) return kv.status();
      absl::StatusOr<PickleValue*> dict = Top();
      if (!dict.ok()) return dict.status();
      return SetItems(*dict, *std::move(kv));
    }
    case 'N':  // NONE
      Push(Scalar(Kind::kNone));
      return absl::OkStatus();
    case 0x88:    // NEWTRUE
    case 0x89: {  // NEWFALSE
      PickleValue* v = Scalar(Kind::kBool);
      v->boolean = op == 0x88;
      Push(v);
      return absl::OkStatus();
    }
    case 'K': {  // BININT1
      ZSHARD_TAKE_(uint8_t, v);
      return PushInt(v);
    }
    case 'M': {  // BININT2
      ZSHARD_TAKE_(uint16_t, v);
      return PushInt(v);
    }
    case 'J': {  // BININT
      ZSHARD_TAKE_(int32_t, v);
      return PushInt(v);
    }
    case 0x8a: {  // LONG1
      ZSHARD_TAKE_(uint8_t, n);
      return PushLong(n);
    }
    case 0x8b: {  // LONG4
      ZSHARD_TAKE_(uint32_t, n);
      return PushLong(n);
    }
    case 'G': {  // BINFLOAT: big-endian
      ZSHARD_TAKE_(uint64_t, raw);
      const uint64_t bits = __builtin_bswap64(raw);
      PickleValue* v = Scalar(Kind::kFloat);
      std::memcpy(&v->number, &bits, sizeof(bits));
      Push(v);
      return absl::OkStatus();
    }
    case 'X':    // BINUNICODE
    case 'B': {  // BINBYTES
      ZSHARD_TAKE_(uint32_t, n);
      return PushString(n);
    }
    case 'T': {  // BINSTRING
      ZSHARD_TAKE_(int32_t, n);
      if (n < 0) return Damaged("a negative string length");
      return PushString(static_cast<uint64_t>(n));
    }
    case 0x8c:   // SHORT_BINUNICODE
    case 'U':    // SHORT_BINSTRING
    case 'C': {  // SHORT_BINBYTES
      ZSHARD_TAKE_(uint8_t, n);
      return PushString(n);
    }
    case 0x8d:    // BINUNICODE8
    case 0x8e: {  // BINBYTES8
      ZSHARD_TAKE_(uint64_t, n);
      return PushString(n);
    }
    case 'c': {  // GLOBAL
      absl::StatusOr<std::string> module = TakeLine();
      if (!module.ok()) return module.status();
      absl::StatusOr<std::string> name = TakeLine();
      if (!name.ok()) return name.status();
      PickleValue* g = doc_.New(Kind::kGlobal);
      g->text = *std::move(module);
      g->name = *std::move(name);
      Push(g);
      return absl::OkStatus();
    }
    case 0x93: {  // STACK_GLOBAL
      ZSHARD_POP_(name);
      ZSHARD_POP_(module);
      if (name->kind != Kind::kString || module->kind != Kind::kString) {
        return Damaged("STACK_GLOBAL of values that are not strings");
      }
      PickleValue* g = doc_.New(Kind::kGlobal);
      g->text = module->text;
      g->name = name->text;
      Push(g);
      return absl::OkStatus();
    }
    case 'q': {  // BINPUT
      ZSHARD_TAKE_(uint8_t, i);
      return Memo(i);
    }
    case 'r': {  // LONG_BINPUT
      ZSHARD_TAKE_(uint32_t, i);
      return Memo(i);
    }
    case 0x94:  // MEMOIZE
      return Memo(memo_.size());
    case 'h': {  // BINGET
      ZSHARD_TAKE_(uint8_t, i);
      return Recall(i);
    }
    case 'j': {  // LONG_BINGET
      ZSHARD_TAKE_(uint32_t, i);
      return Recall(i);
    }
    case 'Q': {  // BINPERSID
      ZSHARD_POP_(pid);
      PickleValue* p = doc_.New(Kind::kPersistentId);
      p->args = pid;
      Push(p);
      return absl::OkStatus();
    }
    case 'R':     // REDUCE
    case 0x81: {  // NEWOBJ: cls(*args), the same for what is read here
      ZSHARD_POP_(args);
      ZSHARD_POP_(callable);
      return Call(callable, args);
    }
    case 'b': {  // BUILD
      ZSHARD_POP_(state);
      absl::StatusOr<PickleValue*> object = Top();
      if (!object.ok()) return object.status();
      if ((*object)->kind != Kind::kCall && (*object)->kind != Kind::kDict) {
        return Damaged(
            absl::StrCat("BUILD on a ", PickleKindName((*object)->kind)));
      }
      (*object)->state = state;
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown pickle opcode 0x%02x at byte %d", what_, op, op_at_));
  }
}

#undef ZSHARD_TAKE_
#undef ZSHARD_POP_

}  // namespace

absl::StatusOr<PickleDocument> ReadPickle(absl::string_view bytes,
                                          absl::string_view what) {
  return Machine(bytes, what).Run();
}

}  // namespace zshard::checkpoint
