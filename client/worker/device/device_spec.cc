// ParseDeviceSpec and the names of devices (CheckDeviceUsable is
// device_factory.cc's).
#include "client/worker/device/device_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace zshard::device {

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  DeviceSpec spec;
  if (text == "cpu") return spec;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "cuda")) {
    spec.kind = DeviceKind::kCuda;
    if (rest.empty()) return spec;
    int ordinal = -1;
    if (absl::ConsumePrefix(&rest, ":") && !rest.empty() &&
        rest.find_first_not_of("0123456789") == absl::string_view::npos &&
        absl::SimpleAtoi(rest, &ordinal) && ordinal >= 0 && ordinal <= 1023) {
      spec.ordinal = ordinal;
      return spec;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device must be cpu, cuda or cuda:N (N in [0, 1023]), not '", text, "'"));
}

std::string DeviceSpecName(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::kCpu) return "cpu";
  return absl::StrCat("cuda:", spec.ordinal);
}

absl::string_view DeviceKindName(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? "cuda" : "cpu";
}

}  // namespace zshard::device
