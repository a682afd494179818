// Element type and reduction operator tables.
#include "client/worker/comm/dtype.h"

#include <string>

#include "absl/status/status.h"

namespace zshard::comm {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kBf16:
    case DataType::kFp16:
      return 2;
    case DataType::kFp32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kUint8:
      return 1;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kBf16:
      return "bf16";
    case DataType::kFp16:
      return "fp16";
    case DataType::kFp32:
      return "fp32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUint8:
      return "uint8";
  }
  return "invalid";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
  }
  return "invalid";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (DataType d : {DataType::kBf16, DataType::kFp16, DataType::kFp32,
                     DataType::kInt64, DataType::kUint8}) {
    if (DataTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError("unknown data type '" + std::string(name) +
                                    "' (want bf16, fp16, fp32, int64, uint8)");
}

bool IsValidReduceOp(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMax;
}

}  // namespace zshard::comm
