// CUDA IPC across real processes (label gpu; skipped without a device): on
// every device, a buffer exported here is opened by cuda_ipc_peer, which
// checks this process's bytes and writes its own; they show here. A
// process cannot open its own export; a host pointer cannot be exported.
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/device/cuda_ipc.h"
#include "client/worker/optim/adam_cuda.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/worker/device/shm_buffer_patterns.h"

namespace zshard::device {
namespace {

using ::zshard::testing::Subprocess;
using ::zshard::testing::TempDir;

constexpr size_t kBytes = (size_t{4} << 20) + 3;

std::string PeerBinary() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "cuda_ipc_peer";
  std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "cuda_ipc_peer";
}

TEST(CudaIpcGpuTest, AnotherProcessWritesWhatThisOneReads) {
  const int devices = cuda::DeviceCount();
  if (devices == 0) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  for (int d = 0; d < devices; ++d) {
    SCOPED_TRACE(absl::StrCat("cuda:", d));
    auto buffer = optim::DeviceBuffer::Allocate(kBytes, d);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::vector<uint8_t> host(kBytes);
    FillPattern(host.data(), kBytes, kOwnerSeed);
    ASSERT_TRUE(buffer->CopyFromHost(host.data(), kBytes).ok());
    auto handle = ExportCudaIpcHandle(buffer->data());
    ASSERT_TRUE(handle.ok()) << handle.status();
    // The exporter itself cannot open it.
    EXPECT_EQ(OpenCudaIpcHandle(*handle, d).status().code(),
              absl::StatusCode::kInvalidArgument);

    Subprocess::Options o;
    o.argv = {PeerBinary(),
              absl::BytesToHexString(absl::string_view(
                  reinterpret_cast<const char*>(handle->bytes.data()),
                  handle->bytes.size())),
              std::to_string(kBytes), std::to_string(d)};
    o.stdout_path = dir.File(absl::StrCat("peer", d, ".out"));
    auto peer = Subprocess::Start(o);
    ASSERT_TRUE(peer.ok()) << peer.status();
    EXPECT_EQ((*peer)->Wait(120000), 0) << "see " << o.stdout_path;
    ASSERT_TRUE(buffer->CopyToHost(host.data(), kBytes).ok());
    EXPECT_TRUE(
        CheckPattern(host.data(), kBytes, kMapperSeed, "exporter").ok());
  }
}

TEST(CudaIpcGpuTest, AHostPointerIsNotExported) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<uint8_t> host(64);
  EXPECT_EQ(ExportCudaIpcHandle(host.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zshard::device
