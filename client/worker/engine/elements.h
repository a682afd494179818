// Reading and writing single elements of a param or grad buffer whose dtype
// (bf16, fp16, fp32) is known only at run time, with the one rounding rule
// of the tree (round to nearest even), and the matching communicator types.
#pragma once

#include <cstdint>
#include <cstring>

#include "client/worker/comm/dtype.h"
#include "client/worker/comm/numerics.h"
#include "common/plan/model_spec.h"

namespace zshard::engine {

// The communicator's element type for a plan dtype.
inline comm::DataType CommType(plan::DType dtype) {
  switch (dtype) {
    case plan::DType::kBf16:
      return comm::DataType::kBf16;
    case plan::DType::kFp16:
      return comm::DataType::kFp16;
    case plan::DType::kFp32:
      break;
  }
  return comm::DataType::kFp32;
}

// Element i of `data` (an array of `dtype`) as fp32. Exact.
inline float LoadElement(plan::DType dtype, const void* data, int64_t i) {
  if (dtype == plan::DType::kFp32) return static_cast<const float*>(data)[i];
  const uint16_t bits = static_cast<const uint16_t*>(data)[i];
  return dtype == plan::DType::kBf16 ? comm::Bf16ToFloat(bits)
                                     : comm::Fp16ToFloat(bits);
}

// Stores `value` rounded to `dtype` (nearest even) as element i of `data`.
inline void StoreElement(plan::DType dtype, void* data, int64_t i,
                         float value) {
  if (dtype == plan::DType::kFp32) {
    static_cast<float*>(data)[i] = value;
  } else if (dtype == plan::DType::kBf16) {
    static_cast<uint16_t*>(data)[i] = comm::FloatToBf16(value);
  } else {
    static_cast<uint16_t*>(data)[i] = comm::FloatToFp16(value);
  }
}

// `value` rounded to `dtype` and back to fp32.
inline float RoundTo(plan::DType dtype, float value) {
  uint32_t storage = 0;
  StoreElement(dtype, &storage, 0, value);
  return LoadElement(dtype, &storage, 0);
}

}  // namespace zshard::engine
