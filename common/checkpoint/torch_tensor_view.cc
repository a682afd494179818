// GatherFp32: bounds first (every index the view can reach lies inside the
// storage, with no int64 overflow on the way), then a row-major walk over
// the view's multi-index, converting each element.
#include "common/checkpoint/torch_tensor_view.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace zshard::checkpoint {
namespace {

absl::Status BadView(absl::string_view key, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(key, ": ", why));
}

float Element(const char* base, StorageDType dtype, int64_t index) {
  switch (dtype) {
    case StorageDType::kFloat32: {
      float f;
      std::memcpy(&f, base + index * 4, 4);
      return f;
    }
    case StorageDType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, base + index * 2, 2);
      return BFloat16ToFloat(h);
    }
    case StorageDType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, base + index * 2, 2);
      return HalfToFloat(h);
    }
  }
  return 0;
}

}  // namespace

int StorageDTypeBytes(StorageDType dtype) {
  return dtype == StorageDType::kFloat32 ? 4 : 2;
}

float BFloat16ToFloat(uint16_t bf16) {
  const uint32_t bits = uint32_t{bf16} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = uint32_t{half & 0x8000u} << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // infinity or NaN, payload kept
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    bits = sign;
  } else {  // subnormal: normalise, each shift lowering the exponent
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

absl::StatusOr<std::vector<float>> GatherFp32(absl::string_view storage,
                                              const TensorView& view,
                                              absl::string_view key) {
  const int64_t elem = StorageDTypeBytes(view.dtype);
  const int64_t available = static_cast<int64_t>(storage.size()) / elem;
  const size_t rank = view.shape.size();
  if (view.strides.size() != rank) {
    return BadView(key, absl::StrCat("a shape of ", rank, " dimensions with ",
                                     view.strides.size(), " strides"));
  }
  if (view.offset < 0) return BadView(key, "a negative storage offset");
  int64_t numel = 1;
  int64_t last = view.offset;  // the highest index the view reaches
  for (size_t d = 0; d < rank; ++d) {
    if (view.shape[d] < 0 || view.strides[d] < 0) {
      return BadView(key, "a negative size or stride");
    }
    int64_t reach = 0;
    if (__builtin_mul_overflow(numel, view.shape[d], &numel) ||
        (view.shape[d] > 0 &&
         (__builtin_mul_overflow(view.shape[d] - 1, view.strides[d], &reach) ||
          __builtin_add_overflow(last, reach, &last)))) {
      return BadView(key, "a shape or stride too large");
    }
  }
  // A view may not hold more elements than its storage: torch saves no
  // expanded (stride 0) state, and the bound keeps memory to the file's.
  if (numel > available) {
    return BadView(key, absl::StrCat("a view of ", numel,
                                     " elements of a storage of ", available));
  }
  if (numel > 0 && last >= available) {
    return BadView(key, absl::StrCat("the tensor reads element ", last,
                                     " of a storage of ", available));
  }
  std::vector<float> out(static_cast<size_t>(numel));
  if (numel == 0) return out;
  const char* base = storage.data();
  // Row-major walk: `index` follows the multi-index `at`.
  std::vector<int64_t> at(rank, 0);
  int64_t index = view.offset;
  for (int64_t i = 0; i < numel; ++i) {
    out[static_cast<size_t>(i)] = Element(base, view.dtype, index);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < view.shape[d]) {
        index += view.strides[d];
        break;
      }
      index -= (at[d] - 1) * view.strides[d];
      at[d] = 0;
    }
  }
  return out;
}

}  // namespace zshard::checkpoint
