// The file torch.save writes (the zip format of torch >= 1.6), for what
// zshard moves in and out of it: {"model": state_dict, "optimizer": an
// AdamW state_dict}, a plain state_dict, or {"model": state_dict} alone.
// Tensors are read from float32, bfloat16 or float16 storages (any view:
// offset and strides) into fp32, and always written as contiguous fp32.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

// A tensor's fp32 values in row-major order of `shape`.
struct TorchTensor {
  std::vector<int64_t> shape;  // empty for a 0-d tensor (one value)
  std::vector<float> values;   // the product of `shape` values
};

// One param's entry in a state_dict.
struct NamedTensor {
  std::string name;
  TorchTensor tensor;
  // Reading: the index of an earlier entry whose view of the same storage
  // this one is (a tied weight, which torch saves once), or -1. Ignored
  // when writing.
  int alias_of = -1;
};

// One param's AdamW state, as torch 1.13 keeps it.
struct AdamWParamState {
  double step = 0;  // torch keeps a float32 0-d tensor
  TorchTensor exp_avg;
  TorchTensor exp_avg_sq;
};

// One param group of an AdamW state_dict: the hyperparameters and the
// indices of its params in the optimizer's state.
struct AdamWParamGroup {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  bool amsgrad = false;
  bool maximize = false;
  bool capturable = false;
  std::vector<int64_t> params;
};

// torch.optim.AdamW's state_dict(): "state" by param index (params that
// never stepped have none) and "param_groups".
struct AdamWStateDict {
  std::map<int64_t, AdamWParamState> state;
  std::vector<AdamWParamGroup> param_groups;
};

struct TorchCheckpoint {
  std::vector<NamedTensor> model;  // the state_dict, in its order
  std::optional<AdamWStateDict> optimizer;
};

// Reads the torch file at `path` (held in memory while it is read).
// NotFound when missing; DataLoss for a damaged file (truncated, a bad
// CRC-32, a storage shorter than its tensors); InvalidArgument, one line
// naming the key and what was found, for anything else: not a torch zip
// file, a value that is not a tensor where one belongs, a dtype other than
// float32, bfloat16 or float16, a structure other than the three above.
// Top-level keys other than "model" and "optimizer" are ignored.
absl::StatusOr<TorchCheckpoint> ReadTorchFile(const std::string& path);

// The same from the file's bytes; `what` names it in messages.
absl::StatusOr<TorchCheckpoint> ParseTorchFile(absl::string_view bytes,
                                               absl::string_view what);

// Writes `checkpoint` as torch.save({"model": OrderedDict, "optimizer":
// {...}}) would (the "optimizer" key only when set), every tensor fp32,
// through a temporary file and a rename. The bytes depend only on
// `checkpoint`. InvalidArgument for a tensor whose values do not match its
// shape; the I/O error naming the path otherwise.
absl::Status WriteTorchFile(const TorchCheckpoint& checkpoint,
                            const std::string& path);

// The bytes WriteTorchFile writes.
absl::StatusOr<std::string> EncodeTorchFile(const TorchCheckpoint& checkpoint);

}  // namespace zshard::checkpoint
