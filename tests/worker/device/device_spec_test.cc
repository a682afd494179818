// ParseDeviceSpec accepts cpu, cuda and cuda:N only; CheckDeviceUsable
// refuses cuda with one line where this machine or build has no GPU.
#include "client/worker/device/device_spec.h"

#include <gtest/gtest.h>

namespace zshard::device {
namespace {

TEST(DeviceSpecTest, ParsesCpuCudaAndOrdinal) {
  auto cpu = ParseDeviceSpec("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->kind, DeviceKind::kCpu);
  auto cuda = ParseDeviceSpec("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(*cuda, (DeviceSpec{DeviceKind::kCuda, 0}));
  auto three = ParseDeviceSpec("cuda:3");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*three, (DeviceSpec{DeviceKind::kCuda, 3}));
  EXPECT_EQ(DeviceSpecName(*three), "cuda:3");
  EXPECT_EQ(DeviceSpecName(*cpu), "cpu");
  EXPECT_EQ(DeviceKindName(three->kind), "cuda");
}

TEST(DeviceSpecTest, RefusesEverythingElseNamingIt) {
  for (const char* bad :
       {"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:1024", "cuda:1 ",
        "cuda0", "cpu:0", "cuda:99999999999"}) {
    auto spec = ParseDeviceSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(std::string("'") + bad + "'"),
              std::string::npos)
        << spec.status();
  }
}

TEST(DeviceSpecTest, CpuIsAlwaysUsable) {
  EXPECT_TRUE(CheckDeviceUsable(DeviceSpec{}).ok());
}

TEST(DeviceSpecTest, AMissingCudaDeviceIsOneLine) {
  // Ordinal 1023 exists on no machine this runs on.
  const absl::Status s = CheckDeviceUsable({DeviceKind::kCuda, 1023});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s;
  EXPECT_NE(s.message().find("--device cuda:1023"), std::string::npos) << s;
}

}  // namespace
}  // namespace zshard::device
