// ReadTorchFile / ParseTorchFile: the zip archive, its data.pkl unpickled
// into values, then those values interpreted as the structures torch.save
// writes for a state_dict and an AdamW state_dict. Every message names the
// file and the key ("model['fc1.weight']").
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/pickle_reader.h"
#include "common/checkpoint/torch_file.h"
#include "common/checkpoint/torch_tensor_view.h"
#include "common/checkpoint/zip_reader.h"
#include "common/file_io.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

using Kind = PickleValue::Kind;

// What a tensor read from the pickle is, besides its values: where in
// which storage it lies, to find tied entries.
struct ReadTensor {
  TorchTensor tensor;
  std::string identity;
};

std::string Quoted(const PickleValue* key) {
  if (key->kind == Kind::kString) return absl::StrCat("['", key->text, "']");
  if (key->kind == Kind::kInt) return absl::StrCat("[", key->integer, "]");
  return absl::StrCat("[<", PickleKindName(key->kind), ">]");
}

// A value's kind for messages ("an int", "None"); a global or a call by
// its name.
std::string Found(const PickleValue* v) {
  if (v->kind == Kind::kGlobal) {
    return absl::StrCat("the global ", v->text, ".", v->name);
  }
  if (v->kind == Kind::kCall && v->callable->kind == Kind::kGlobal) {
    return absl::StrCat("a ", v->callable->text, ".", v->callable->name,
                        " object");
  }
  if (v->kind == Kind::kNone) return "None";
  if (v->kind == Kind::kInt) return "an int";
  return absl::StrCat("a ", PickleKindName(v->kind));
}

// The value of string key `key` in dict `d`, or null.
const PickleValue* Lookup(const PickleValue* d, absl::string_view key) {
  for (const auto& [k, v] : d->dict) {
    if (k->kind == Kind::kString && k->text == key) return v;
  }
  return nullptr;
}

// torch.<Name>Storage -> the dtype torch prints, for messages.
std::string StorageDTypeName(const std::string& storage) {
  static const std::map<std::string, std::string> kNames = {
      {"DoubleStorage", "float64"},
      {"LongStorage", "int64"},
      {"IntStorage", "int32"},
      {"ShortStorage", "int16"},
      {"CharStorage", "int8"},
      {"ByteStorage", "uint8"},
      {"BoolStorage", "bool"},
      {"ComplexFloatStorage", "complex64"},
      {"ComplexDoubleStorage", "complex128"}};
  auto it = kNames.find(storage);
  return it == kNames.end() ? storage : it->second;
}

class Interpreter {
 public:
  Interpreter(const ZipReader& zip, std::string prefix, std::string what)
      : zip_(zip), prefix_(std::move(prefix)), what_(std::move(what)) {}

  absl::Status Bad(const std::string& key, absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat("torch file '", what_, "': ", key, ": ", why));
  }

  absl::Status Lost(const std::string& key, absl::string_view why) const {
    return absl::DataLossError(
        absl::StrCat("torch file '", what_, "': ", key, ": ", why));
  }

  absl::StatusOr<TorchCheckpoint> Root(const PickleValue* root) {
    if (root->kind != Kind::kDict) {
      return Bad("the saved object",
                 absl::StrCat(Found(root),
                              " where a dict belongs (a "
                              "state_dict or {\"model\": ..., "
                              "\"optimizer\": ...})"));
    }
    TorchCheckpoint out;
    const PickleValue* model = Lookup(root, "model");
    if (model == nullptr || model->kind != Kind::kDict) {
      ZSHARD_ASSIGN_OR_RETURN(out.model, StateDict(root, "state_dict"));
      return out;
    }
    ZSHARD_ASSIGN_OR_RETURN(out.model, StateDict(model, "model"));
    const PickleValue* opt = Lookup(root, "optimizer");
    if (opt != nullptr && opt->kind != Kind::kNone) {
      ZSHARD_ASSIGN_OR_RETURN(out.optimizer, Optimizer(opt));
    }
    return out;
  }

 private:
  absl::StatusOr<std::vector<NamedTensor>> StateDict(const PickleValue* d,
                                                     const std::string& key) {
    std::vector<NamedTensor> out;
    std::set<std::string> names;
    std::map<std::string, int> by_identity;
    for (const auto& [k, v] : d->dict) {
      const std::string path = key + Quoted(k);
      if (k->kind != Kind::kString) {
        return Bad(path, absl::StrCat("a key that is ", Found(k),
                                      ", not a param name"));
      }
      if (!names.insert(k->text).second) return Bad(path, "appears twice");
      ZSHARD_ASSIGN_OR_RETURN(ReadTensor t, Tensor(v, path));
      NamedTensor named{k->text, std::move(t.tensor), -1};
      auto [it, fresh] =
          by_identity.emplace(t.identity, static_cast<int>(out.size()));
      if (!fresh) named.alias_of = it->second;
      out.push_back(std::move(named));
    }
    return out;
  }

  absl::StatusOr<AdamWStateDict> Optimizer(const PickleValue* opt) {
    const std::string key = "optimizer";
    if (opt->kind != Kind::kDict) {
      return Bad(key, absl::StrCat(Found(opt),
                                   " where an optimizer "
                                   "state_dict belongs"));
    }
    const PickleValue* state = Lookup(opt, "state");
    const PickleValue* groups = Lookup(opt, "param_groups");
    if (state == nullptr || state->kind != Kind::kDict || groups == nullptr ||
        groups->kind != Kind::kList) {
      return Bad(key,
                 "not an optimizer state_dict (it needs a dict 'state' "
                 "and a list 'param_groups')");
    }
    AdamWStateDict out;
    for (const auto& [k, v] : state->dict) {
      const std::string path = key + "['state']" + Quoted(k);
      if (k->kind != Kind::kInt) {
        return Bad(path, absl::StrCat("a key that is ", Found(k),
                                      ", not a param index"));
      }
      if (out.state.count(k->integer) > 0) return Bad(path, "appears twice");
      ZSHARD_ASSIGN_OR_RETURN(out.state[k->integer], ParamState(v, path));
    }
    for (size_t i = 0; i < groups->items.size(); ++i) {
      ZSHARD_ASSIGN_OR_RETURN(
          AdamWParamGroup g,
          Group(groups->items[i],
                absl::StrCat(key, "['param_groups'][", i, "]")));
      out.param_groups.push_back(std::move(g));
    }
    return out;
  }

  absl::StatusOr<AdamWParamState> ParamState(const PickleValue* v,
                                             const std::string& key) {
    if (v->kind != Kind::kDict) {
      return Bad(key, absl::StrCat(Found(v),
                                   " where a dict of AdamW state "
                                   "belongs"));
    }
    AdamWParamState out;
    bool step = false, m = false, s = false;
    for (const auto& [k, value] : v->dict) {
      const std::string path = key + Quoted(k);
      const std::string name = k->kind == Kind::kString ? k->text : "";
      if (name == "step") {
        ZSHARD_ASSIGN_OR_RETURN(out.step, Step(value, path));
        step = true;
      } else if (name == "exp_avg") {
        ZSHARD_ASSIGN_OR_RETURN(ReadTensor t, Tensor(value, path));
        out.exp_avg = std::move(t.tensor);
        m = true;
      } else if (name == "exp_avg_sq") {
        ZSHARD_ASSIGN_OR_RETURN(ReadTensor t, Tensor(value, path));
        out.exp_avg_sq = std::move(t.tensor);
        s = true;
      } else {
        return Bad(path, name == "max_exp_avg_sq"
                             ? "amsgrad state, which zshard's AdamW has not"
                             : "not a key of AdamW's state");
      }
    }
    if (!step || !m || !s) {
      return Bad(
          key,
          absl::StrCat("lacks '",
                       !step ? "step" : (!m ? "exp_avg" : "exp_avg_sq"), "'"));
    }
    return out;
  }

  // torch 1.13 keeps a float32 0-d tensor; older ones a Python number.
  absl::StatusOr<double> Step(const PickleValue* v, const std::string& key) {
    if (v->kind == Kind::kInt) return static_cast<double>(v->integer);
    if (v->kind == Kind::kFloat) return v->number;
    ZSHARD_ASSIGN_OR_RETURN(ReadTensor t, Tensor(v, key));
    if (t.tensor.values.size() != 1) {
      return Bad(key, absl::StrCat("a tensor of ", t.tensor.values.size(),
                                   " elements where the step belongs"));
    }
    return static_cast<double>(t.tensor.values[0]);
  }

  absl::StatusOr<double> Number(const PickleValue* v, const std::string& key) {
    if (v->kind == Kind::kInt) return static_cast<double>(v->integer);
    if (v->kind == Kind::kFloat) return v->number;
    return Bad(key, absl::StrCat(Found(v), " where a number belongs"));
  }

  absl::StatusOr<bool> Bool(const PickleValue* v, const std::string& key) {
    if (v->kind == Kind::kBool) return v->boolean;
    return Bad(key, absl::StrCat(Found(v), " where a bool belongs"));
  }

  absl::StatusOr<AdamWParamGroup> Group(const PickleValue* v,
                                        const std::string& key) {
    if (v->kind != Kind::kDict) {
      return Bad(key, absl::StrCat(Found(v), " where a param group belongs"));
    }
    AdamWParamGroup g;
    bool params = false;
    // Keys other than these (foreach, differentiable, fused, initial_lr of
    // a scheduler, ...) say nothing zshard keeps.
    for (const auto& [k, value] : v->dict) {
      if (k->kind != Kind::kString) continue;
      const std::string path = key + Quoted(k);
      const std::string& name = k->text;
      if (name == "lr") {
        ZSHARD_ASSIGN_OR_RETURN(g.lr, Number(value, path));
      } else if (name == "eps") {
        ZSHARD_ASSIGN_OR_RETURN(g.eps, Number(value, path));
      } else if (name == "weight_decay") {
        ZSHARD_ASSIGN_OR_RETURN(g.weight_decay, Number(value, path));
      } else if (name == "amsgrad") {
        ZSHARD_ASSIGN_OR_RETURN(g.amsgrad, Bool(value, path));
      } else if (name == "maximize") {
        ZSHARD_ASSIGN_OR_RETURN(g.maximize, Bool(value, path));
      } else if (name == "capturable") {
        ZSHARD_ASSIGN_OR_RETURN(g.capturable, Bool(value, path));
      } else if (name == "betas") {
        if ((value->kind != Kind::kTuple && value->kind != Kind::kList) ||
            value->items.size() != 2) {
          return Bad(path, absl::StrCat(Found(value),
                                        " where a pair of numbers belongs"));
        }
        ZSHARD_ASSIGN_OR_RETURN(g.beta1, Number(value->items[0], path));
        ZSHARD_ASSIGN_OR_RETURN(g.beta2, Number(value->items[1], path));
      } else if (name == "params") {
        if (value->kind != Kind::kList) {
          return Bad(path, absl::StrCat(Found(value),
                                        " where a list of indices belongs"));
        }
        for (const PickleValue* i : value->items) {
          if (i->kind != Kind::kInt) {
            return Bad(path, absl::StrCat("holds ", Found(i),
                                          " where a param index belongs"));
          }
          g.params.push_back(i->integer);
        }
        params = true;
      }
    }
    if (!params) return Bad(key, "lacks 'params'");
    return g;
  }

  absl::StatusOr<std::vector<int64_t>> Ints(const PickleValue* v,
                                            const std::string& key,
                                            const char* what) {
    if (v->kind != Kind::kTuple && v->kind != Kind::kList) {
      return Bad(key, absl::StrCat(Found(v), " where the tensor's ", what,
                                   " belongs"));
    }
    std::vector<int64_t> out;
    for (const PickleValue* i : v->items) {
      if (i->kind != Kind::kInt) {
        return Bad(key, absl::StrCat("a tensor ", what, " holding ", Found(i)));
      }
      out.push_back(i->integer);
    }
    return out;
  }

  absl::StatusOr<ReadTensor> Tensor(const PickleValue* v,
                                    const std::string& key) {
    // nn.Parameter: _rebuild_parameter(tensor, requires_grad, hooks).
    if (v->kind == Kind::kCall &&
        v->callable->IsGlobal("torch._utils", "_rebuild_parameter") &&
        !v->args->items.empty()) {
      v = v->args->items[0];
    }
    if (v->kind != Kind::kCall ||
        !v->callable->IsGlobal("torch._utils", "_rebuild_tensor_v2") ||
        v->args->items.size() < 4) {
      return Bad(key, absl::StrCat(Found(v), " where a tensor belongs"));
    }
    const std::vector<PickleValue*>& args = v->args->items;
    const PickleValue* pid = args[0];
    if (pid->kind != Kind::kPersistentId || pid->args->kind != Kind::kTuple ||
        pid->args->items.size() != 5 ||
        pid->args->items[1]->kind != Kind::kGlobal ||
        pid->args->items[2]->kind != Kind::kString) {
      return Bad(key,
                 "a tensor whose storage is not a persistent "
                 "('storage', type, key, location, numel) id");
    }
    const PickleValue* type = pid->args->items[1];
    const std::string& storage_key = pid->args->items[2]->text;
    TensorView view;
    if (type->IsGlobal("torch", "FloatStorage")) {
      view.dtype = StorageDType::kFloat32;
    } else if (type->IsGlobal("torch", "BFloat16Storage")) {
      view.dtype = StorageDType::kBFloat16;
    } else if (type->IsGlobal("torch", "HalfStorage")) {
      view.dtype = StorageDType::kFloat16;
    } else {
      return Bad(key, absl::StrCat("a ", StorageDTypeName(type->name),
                                   " tensor (", type->text, ".", type->name,
                                   "); only float32, bfloat16 and float16 "
                                   "are read"));
    }
    if (args[1]->kind != Kind::kInt) {
      return Bad(key,
                 absl::StrCat("a storage offset that is ", Found(args[1])));
    }
    view.offset = args[1]->integer;
    ZSHARD_ASSIGN_OR_RETURN(view.shape, Ints(args[2], key, "shape"));
    ZSHARD_ASSIGN_OR_RETURN(view.strides, Ints(args[3], key, "stride"));
    ZSHARD_ASSIGN_OR_RETURN(absl::string_view storage,
                            Storage(storage_key, key));
    const PickleValue* numel = pid->args->items[4];
    const int64_t elem = StorageDTypeBytes(view.dtype);
    if (numel->kind != Kind::kInt || numel->integer < 0 ||
        static_cast<uint64_t>(numel->integer) !=
            storage.size() / static_cast<uint64_t>(elem) ||
        storage.size() % static_cast<uint64_t>(elem) != 0) {
      return Lost(
          key,
          absl::StrCat("storage '", storage_key, "' holds ", storage.size(),
                       " bytes, not the ",
                       numel->kind == Kind::kInt ? absl::StrCat(numel->integer)
                                                 : std::string("?"),
                       " elements of ", elem, " bytes its id records"));
    }
    ReadTensor out;
    ZSHARD_ASSIGN_OR_RETURN(out.tensor.values, GatherFp32(storage, view, key));
    out.tensor.shape = view.shape;
    out.identity = absl::StrCat(storage_key, "/", view.offset);
    for (size_t d = 0; d < view.shape.size(); ++d) {
      absl::StrAppend(&out.identity, "/", view.shape[d], ":", view.strides[d]);
    }
    return out;
  }

  // The bytes of storage `storage_key`, CRC-checked once.
  absl::StatusOr<absl::string_view> Storage(const std::string& storage_key,
                                            const std::string& key) {
    auto it = storages_.find(storage_key);
    if (it != storages_.end()) return it->second;
    const std::string entry = absl::StrCat(prefix_, "data/", storage_key);
    if (!zip_.Has(entry)) {
      return Lost(
          key, absl::StrCat("its storage '", entry, "' is not in the archive"));
    }
    ZSHARD_ASSIGN_OR_RETURN(absl::string_view bytes, zip_.Read(entry));
    storages_.emplace(storage_key, bytes);
    return bytes;
  }

  const ZipReader& zip_;
  std::string prefix_;
  std::string what_;
  std::map<std::string, absl::string_view> storages_;
};

}  // namespace

absl::StatusOr<TorchCheckpoint> ParseTorchFile(absl::string_view bytes,
                                               absl::string_view what) {
  ZSHARD_ASSIGN_OR_RETURN(ZipReader zip,
                          ZipReader::Open(bytes, std::string(what)));
  // torch.load takes the directory of the first entry as the archive's.
  std::string prefix;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos &&
        e.name.compare(slash + 1, std::string::npos, "data.pkl") == 0) {
      prefix = e.name.substr(0, slash + 1);
      break;
    }
  }
  if (prefix.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", what,
                     "' is a zip archive but not a torch file (no "
                     "ARCHIVE/data.pkl)"));
  }
  if (zip.Has(prefix + "byteorder")) {
    ZSHARD_ASSIGN_OR_RETURN(absl::string_view order,
                            zip.Read(prefix + "byteorder"));
    if (order != "little") {
      return absl::InvalidArgumentError(absl::StrCat(
          "torch file '", what, "' was saved ", order.substr(0, 16),
          "-endian; only little-endian files are read"));
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(absl::string_view pickle,
                          zip.Read(prefix + "data.pkl"));
  ZSHARD_ASSIGN_OR_RETURN(
      PickleDocument doc,
      ReadPickle(pickle, absl::StrCat("torch file '", what, "' data.pkl")));
  return Interpreter(zip, prefix, std::string(what)).Root(doc.root());
}

absl::StatusOr<TorchCheckpoint> ReadTorchFile(const std::string& path) {
  ZSHARD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseTorchFile(bytes, path);
}

}  // namespace zshard::checkpoint
