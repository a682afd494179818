// OpenDevice and CheckDeviceUsable: the one place that knows whether this
// build has the CUDA device.
#include "absl/strings/str_cat.h"
#include "client/worker/device/device.h"
#include "client/worker/device/device_spec.h"
#include "client/worker/device/host_device.h"
#if ZSHARD_HAVE_CUDA
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/device/cuda_device.h"
#endif

namespace zshard::device {

absl::Status CheckDeviceUsable(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::kCpu) return absl::OkStatus();
  const std::string name = DeviceSpecName(spec);
#if ZSHARD_HAVE_CUDA
  const int count = cuda::DeviceCount();
  if (count <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device ", name,
        ": no usable CUDA device on this machine (no GPU or no driver)"));
  }
  if (spec.ordinal >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device ", name, ": this machine has ", count, " CUDA device",
        count == 1 ? "" : "s", " (0..", count - 1, ")"));
  }
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "--device ", name,
      ": this build has no CUDA support (configure with the CUDA toolkit "
      "installed and ZSHARD_WITH_CUDA=ON)"));
#endif
}

absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::kCpu) return OpenHostDevice();
  absl::Status usable = CheckDeviceUsable(spec);
  if (!usable.ok()) return usable;
#if ZSHARD_HAVE_CUDA
  return OpenCudaDevice(spec.ordinal);
#else
  return absl::FailedPreconditionError("unreachable: no cuda device");
#endif
}

}  // namespace zshard::device
