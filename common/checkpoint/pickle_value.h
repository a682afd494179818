// The values a pickle builds, as the pickle reader leaves them: a tree (a
// graph, where the pickle shares a value) of plain Python values plus the
// unresolved parts, globals, calls (REDUCE) and persistent ids, for the
// caller to interpret. Nothing of the pickle is executed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zshard::checkpoint {

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,  // str (UTF-8) or bytes
    kTuple,
    kList,
    kDict,          // dict or collections.OrderedDict, in insertion order
    kGlobal,        // module.name: `text` is the module, `name` the name
    kCall,          // callable(*args): `callable`, `args` (a tuple)
    kPersistentId,  // BINPERSID: `args` is the persistent id
  };

  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;                 // kString; kGlobal's module
  std::string name;                 // kGlobal's name
  std::vector<PickleValue*> items;  // tuple, list
  std::vector<std::pair<PickleValue*, PickleValue*>> dict;  // kDict
  PickleValue* callable = nullptr;                          // kCall
  PickleValue* args = nullptr;  // kCall, kPersistentId
  // BUILD's state on a call or dict (e.g. a state_dict's `_metadata`), or
  // null.
  PickleValue* state = nullptr;

  // Whether this is a global module.name.
  bool IsGlobal(const char* module, const char* global) const {
    return kind == Kind::kGlobal && text == module && name == global;
  }
};

// "None", "bool", "int", "float", "str", "tuple", "list", "dict",
// "global", "call", "persistent id": for messages.
const char* PickleKindName(PickleValue::Kind kind);

// Owns the values of one unpickled document; the root and every pointer
// inside stay valid while it lives (also after a move).
class PickleDocument {
 public:
  const PickleValue* root() const { return root_; }

  // For the reader: a new value of `kind` owned by this document.
  PickleValue* New(PickleValue::Kind kind) {
    nodes_.push_back(std::make_unique<PickleValue>());
    nodes_.back()->kind = kind;
    return nodes_.back().get();
  }
  void set_root(PickleValue* root) { root_ = root; }

 private:
  std::vector<std::unique_ptr<PickleValue>> nodes_;
  PickleValue* root_ = nullptr;
};

}  // namespace zshard::checkpoint
