// The NCCL element type of a Communicator DataType, for the NCCL backend and
// for code that calls NCCL directly beside it (the benchmark's raw NCCL
// baseline). Includes nccl.h: only for targets built with NCCL.
#pragma once

#include <nccl.h>

#include "client/worker/comm/dtype.h"

namespace zshard::comm {

inline ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kBf16:
      return ncclBfloat16;
    case DataType::kFp16:
      return ncclFloat16;
    case DataType::kFp32:
      return ncclFloat32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint8:
      return ncclUint8;
  }
  return ncclUint8;
}

}  // namespace zshard::comm
