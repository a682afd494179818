// Host numerics shared by every algorithm that reduces on the CPU: bf16 and
// fp16 conversions and the one reduction kernel, which accumulates in fp32
// (int64 and uint8 natively) and rounds to the element type once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "client/worker/comm/dtype.h"

namespace zshard::comm {

// bf16 <-> fp32. FloatToBf16 rounds to nearest even and keeps NaNs quiet.
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float value);

// IEEE binary16 <-> fp32. FloatToFp16 rounds to nearest even, overflows to
// infinity and produces subnormals.
float Fp16ToFloat(uint16_t bits);
uint16_t FloatToFp16(float value);

// out[i] = inputs[0][i] (op) inputs[1][i] (op) ... for i in [0, count),
// combining the inputs in the order given. Floating-point types accumulate
// in fp32 and round to `dtype` once per element; int64 and uint8 (wrapping)
// reduce natively. `out` may alias any input element-for-element. Requires
// num_inputs >= 1 and valid dtype/op.
void ReduceInto(DataType dtype, ReduceOp op, const void* const* inputs,
                int num_inputs, void* out, size_t count);

}  // namespace zshard::comm
