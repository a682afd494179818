// The host device: plain (64-byte aligned) host memory, memcpy copies and
// the step's kernels as loops on the calling thread; Adam is CpuAdam.
#pragma once

#include <memory>

#include "client/worker/device/device.h"

namespace zshard::device {

// The cpu device. Never fails.
std::unique_ptr<Device> OpenHostDevice();

}  // namespace zshard::device
