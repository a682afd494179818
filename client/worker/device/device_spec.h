// DeviceSpec: which device a worker's engine runs on ("cpu", "cuda",
// "cuda:N"), parsed once from --device and checked at start, so that a
// worker asked for a GPU never trains silently on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::device {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  // CUDA device ordinal (kCuda only). Default 0.
  int ordinal = 0;
  bool operator==(const DeviceSpec& o) const {
    return kind == o.kind && ordinal == o.ordinal;
  }
  bool operator!=(const DeviceSpec& o) const { return !(*this == o); }
};

// Parses "cpu", "cuda" (ordinal 0) or "cuda:N" (N a decimal in [0, 1023]).
// InvalidArgument naming the bad value otherwise.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

// "cpu" or "cuda:N".
std::string DeviceSpecName(const DeviceSpec& spec);

// "cpu" or "cuda": what a worker reports to the coordinator.
absl::string_view DeviceKindName(DeviceKind kind);

// OK for cpu. For cuda: OK when this build has CUDA and device `ordinal`
// exists and can be used; otherwise FailedPrecondition with one line naming
// the problem ("--device cuda:1: this machine has 1 CUDA device (0)", "...:
// no usable CUDA device (no driver)", "...: this build has no CUDA
// support").
absl::Status CheckDeviceUsable(const DeviceSpec& spec);

}  // namespace zshard::device
