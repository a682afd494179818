// A tensor as a torch file stores it: a view (offset, shape, strides, in
// elements) of a storage of float32, bfloat16 or float16 values; and its
// values gathered into row-major fp32, converted exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

enum class StorageDType { kFloat32, kBFloat16, kFloat16 };

// Bytes per element: 4, 2, 2.
int StorageDTypeBytes(StorageDType dtype);

struct TensorView {
  StorageDType dtype = StorageDType::kFloat32;
  int64_t offset = 0;            // in elements
  std::vector<int64_t> shape;    // empty for a 0-d tensor
  std::vector<int64_t> strides;  // in elements, one per dimension
};

// The view's elements of `storage` (little-endian values of view.dtype) in
// row-major order of its shape, as fp32: float32 as is, bfloat16 and
// float16 widened exactly (subnormals, infinities and NaNs included).
// DataLoss, naming `key`, for a view that reads outside the storage or
// whose shape and strides disagree or are negative.
absl::StatusOr<std::vector<float>> GatherFp32(absl::string_view storage,
                                              const TensorView& view,
                                              absl::string_view key);

// The float of an IEEE half / a bfloat16, exactly.
float HalfToFloat(uint16_t half);
float BFloat16ToFloat(uint16_t bf16);

}  // namespace zshard::checkpoint
