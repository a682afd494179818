// The CUDA IPC calls' refusals, which need no GPU: arguments are checked
// before CUDA is asked; a build without CUDA answers Unimplemented; a CUDA
// build on a machine without a device answers FailedPrecondition where a
// device is needed. Runs in every build (label unit).
#include "client/worker/device/cuda_ipc.h"

#include "client/worker/device/device_spec.h"
#include "gtest/gtest.h"

namespace zshard::device {
namespace {

constexpr bool kBuiltWithCuda = ZSHARD_TEST_BUILT_WITH_CUDA != 0;

bool HaveGpu() { return CheckDeviceUsable({DeviceKind::kCuda, 0}).ok(); }

void ExpectOneLine(const absl::Status& s, absl::StatusCode code,
                   absl::string_view mentions) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find(mentions), absl::string_view::npos) << s;
}

TEST(CudaIpcTest, WithoutCudaEveryCallIsUnimplemented) {
  if (kBuiltWithCuda) GTEST_SKIP() << "this build has CUDA";
  int host = 0;
  ExpectOneLine(ExportCudaIpcHandle(&host).status(),
                absl::StatusCode::kUnimplemented, "no cuda support");
  ExpectOneLine(OpenCudaIpcHandle(CudaIpcHandle{}, 0).status(),
                absl::StatusCode::kUnimplemented, "no cuda support");
  ExpectOneLine(CloseCudaIpcHandle(&host), absl::StatusCode::kUnimplemented,
                "no cuda support");
}

TEST(CudaIpcTest, BadArgumentsAreRefusedBeforeCudaIsAsked) {
  if (!kBuiltWithCuda) GTEST_SKIP() << "this build has no CUDA";
  ExpectOneLine(ExportCudaIpcHandle(nullptr).status(),
                absl::StatusCode::kInvalidArgument, "null device pointer");
  ExpectOneLine(OpenCudaIpcHandle(CudaIpcHandle{}, -1).status(),
                absl::StatusCode::kInvalidArgument, "device ordinal -1 < 0");
  ExpectOneLine(CloseCudaIpcHandle(nullptr), absl::StatusCode::kInvalidArgument,
                "null device pointer");
}

TEST(CudaIpcTest, AHostPointerOrAMissingDeviceIsRefused) {
  if (!kBuiltWithCuda) GTEST_SKIP() << "this build has no CUDA";
  int host = 0;
  if (HaveGpu()) {
    ExpectOneLine(ExportCudaIpcHandle(&host).status(),
                  absl::StatusCode::kInvalidArgument, "not device memory");
  } else {
    ExpectOneLine(ExportCudaIpcHandle(&host).status(),
                  absl::StatusCode::kFailedPrecondition,
                  "no usable cuda device");
  }
  // No machine has 1024 devices.
  ExpectOneLine(OpenCudaIpcHandle(CudaIpcHandle{}, 1023).status(),
                absl::StatusCode::kFailedPrecondition,
                "cuda:1023 is not usable");
}

}  // namespace
}  // namespace zshard::device
