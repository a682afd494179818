// Element types and reduction operators understood by every Communicator,
// with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::comm {

// The element type of a collective's buffers. bf16 and fp16 are stored as
// their 16-bit patterns; int64 and uint8 serve counters and byte moves.
enum class DataType : uint8_t { kBf16, kFp16, kFp32, kInt64, kUint8 };

// How elements are combined by a reduction.
enum class ReduceOp : uint8_t { kSum, kMax };

// Bytes per element of `dtype`; 0 for a value outside the enum.
size_t DataTypeSize(DataType dtype);

// "bf16", "fp16", "fp32", "int64", "uint8"; "invalid" otherwise.
absl::string_view DataTypeName(DataType dtype);

// "sum" or "max"; "invalid" otherwise.
absl::string_view ReduceOpName(ReduceOp op);

// Parses a DataTypeName(); InvalidArgument for anything else.
absl::StatusOr<DataType> ParseDataType(absl::string_view name);

// True when `op` is one of the enumerators.
bool IsValidReduceOp(ReduceOp op);

}  // namespace zshard::comm
