// WriteTorchFile / EncodeTorchFile: data.pkl laid out as torch 1.13's
// pickler lays out {"model": OrderedDict, "optimizer": AdamW state_dict}
// (tensors as torch._utils._rebuild_tensor_v2 over persistent storage ids
// "0", "1", ... in order of appearance), then the storages, then
// "version". Entries go to the sink one by one: only one tensor's bytes
// are copied at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/pickle_writer.h"
#include "common/checkpoint/torch_file.h"
#include "common/checkpoint/zip_writer.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

// Every entry lives under this directory; torch.load takes any name.
constexpr char kArchive[] = "archive";

// A tensor to store, in storage-key order.
struct Storage {
  const std::vector<float>* values = nullptr;  // or the scalar below
  float scalar = 0;
};

class Encoder {
 public:
  absl::Status Model(const std::vector<NamedTensor>& model) {
    p_.Global("collections", "OrderedDict");
    p_.EmptyTuple();
    p_.Reduce();
    p_.Mark();
    for (const NamedTensor& t : model) {
      p_.String(t.name);
      ZSHARD_RETURN_IF_ERROR(Tensor(t.tensor, t.name));
    }
    p_.SetItems();
    return absl::OkStatus();
  }

  absl::Status Optimizer(const AdamWStateDict& opt) {
    p_.EmptyDict();
    p_.Mark();
    p_.String("state");
    p_.EmptyDict();
    p_.Mark();
    for (const auto& [index, s] : opt.state) {
      const std::string key = absl::StrCat("optimizer state ", index);
      p_.Int(index);
      p_.EmptyDict();
      p_.Mark();
      p_.String("step");
      Scalar(static_cast<float>(s.step));
      p_.String("exp_avg");
      ZSHARD_RETURN_IF_ERROR(Tensor(s.exp_avg, key + " exp_avg"));
      p_.String("exp_avg_sq");
      ZSHARD_RETURN_IF_ERROR(Tensor(s.exp_avg_sq, key + " exp_avg_sq"));
      p_.SetItems();
    }
    p_.SetItems();
    p_.String("param_groups");
    p_.EmptyList();
    p_.Mark();
    for (const AdamWParamGroup& g : opt.param_groups) Group(g);
    p_.Appends();
    p_.SetItems();
    return absl::OkStatus();
  }

  PickleWriter& pickle() { return p_; }
  const std::vector<Storage>& storages() const { return storages_; }

 private:
  // torch 1.13's AdamW group, its keys in its order.
  void Group(const AdamWParamGroup& g) {
    p_.EmptyDict();
    p_.Mark();
    p_.String("lr");
    p_.Float(g.lr);
    p_.String("betas");
    p_.Float(g.beta1);
    p_.Float(g.beta2);
    p_.SmallTuple(2);
    p_.String("eps");
    p_.Float(g.eps);
    p_.String("weight_decay");
    p_.Float(g.weight_decay);
    p_.String("amsgrad");
    p_.Bool(g.amsgrad);
    p_.String("foreach");
    p_.None();
    p_.String("maximize");
    p_.Bool(g.maximize);
    p_.String("capturable");
    p_.Bool(g.capturable);
    p_.String("params");
    p_.EmptyList();
    p_.Mark();
    for (int64_t i : g.params) p_.Int(i);
    p_.Appends();
    p_.SetItems();
  }

  void IntTuple(const std::vector<int64_t>& values) {
    if (values.empty()) {
      p_.EmptyTuple();
      return;
    }
    if (values.size() > 3) p_.Mark();
    for (int64_t v : values) p_.Int(v);
    if (values.size() > 3) {
      p_.Tuple();
    } else {
      p_.SmallTuple(static_cast<int>(values.size()));
    }
  }

  // _rebuild_tensor_v2(storage, 0, shape, contiguous strides, False,
  // OrderedDict()) over the next storage key, which holds `numel` floats.
  void Rebuild(const std::vector<int64_t>& shape, int64_t numel) {
    p_.Global("torch._utils", "_rebuild_tensor_v2");
    p_.Mark();
    p_.Mark();
    p_.String("storage");
    p_.Global("torch", "FloatStorage");
    p_.String(absl::StrCat(storages_.size() - 1));
    p_.String("cpu");
    p_.Int(numel);
    p_.Tuple();
    p_.PersistentId();
    p_.Int(0);
    IntTuple(shape);
    std::vector<int64_t> stride(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) {
      stride[i - 1] = stride[i] * shape[i];
    }
    IntTuple(stride);
    p_.Bool(false);
    p_.Global("collections", "OrderedDict");
    p_.EmptyTuple();
    p_.Reduce();
    p_.Tuple();
    p_.Reduce();
  }

  absl::Status Tensor(const TorchTensor& t, absl::string_view key) {
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", key, "' has a negative dimension"));
      }
      numel *= d;
    }
    if (static_cast<int64_t>(t.values.size()) != numel) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", key, "' has ", t.values.size(),
                       " values for a shape of ", numel, " elements"));
    }
    storages_.push_back(Storage{&t.values, 0});
    Rebuild(t.shape, numel);
    return absl::OkStatus();
  }

  void Scalar(float value) {
    storages_.push_back(Storage{nullptr, value});
    Rebuild({}, 1);
  }

  PickleWriter p_;
  std::vector<Storage> storages_;
};

absl::Status Emit(const TorchCheckpoint& checkpoint, ByteSink sink) {
  Encoder e;
  PickleWriter& p = e.pickle();
  p.EmptyDict();
  p.Mark();
  p.String("model");
  ZSHARD_RETURN_IF_ERROR(e.Model(checkpoint.model));
  if (checkpoint.optimizer.has_value()) {
    p.String("optimizer");
    ZSHARD_RETURN_IF_ERROR(e.Optimizer(*checkpoint.optimizer));
  }
  p.SetItems();
  const std::string pickle = p.Finish();

  ZipWriter zip(std::move(sink));
  const std::string dir = absl::StrCat(kArchive, "/");
  ZSHARD_RETURN_IF_ERROR(zip.Add(dir + "data.pkl", pickle));
  ZSHARD_RETURN_IF_ERROR(zip.Add(dir + "byteorder", "little"));
  for (size_t i = 0; i < e.storages().size(); ++i) {
    const Storage& s = e.storages()[i];
    const absl::string_view bytes =
        s.values != nullptr
            ? absl::string_view(reinterpret_cast<const char*>(s.values->data()),
                                s.values->size() * sizeof(float))
            : absl::string_view(reinterpret_cast<const char*>(&s.scalar),
                                sizeof(float));
    ZSHARD_RETURN_IF_ERROR(zip.Add(absl::StrCat(dir, "data/", i), bytes));
  }
  ZSHARD_RETURN_IF_ERROR(zip.Add(dir + "version", "3\n"));
  return zip.Finish();
}

}  // namespace

absl::StatusOr<std::string> EncodeTorchFile(const TorchCheckpoint& checkpoint) {
  std::string out;
  ZSHARD_RETURN_IF_ERROR(Emit(checkpoint, [&out](absl::string_view bytes) {
    out.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }));
  return out;
}

absl::Status WriteTorchFile(const TorchCheckpoint& checkpoint,
                            const std::string& path) {
  AtomicFile file;
  ZSHARD_RETURN_IF_ERROR(file.Open(path));
  ZSHARD_RETURN_IF_ERROR(Emit(checkpoint, [&file](absl::string_view bytes) {
    return file.Write(bytes);
  }));
  return file.Commit();
}

}  // namespace zshard::checkpoint
