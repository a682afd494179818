// Runs the conformance suite against the NCCL backend: one CUDA device per
// rank; groups larger than the machine's device count are skipped.
#include "client/worker/comm/cuda_memory.h"
#include "client/worker/cuda/cuda_util.h"
#include "tests/worker/comm/conformance_suite.h"

namespace zshard::comm::testing {
namespace {

class DeviceSpace final : public BufferSpace {
 public:
  void* Alloc(int rank, size_t bytes) override {
    auto ptr = CudaAlloc(rank, bytes);
    EXPECT_TRUE(ptr.ok()) << ptr.status();
    return ptr.ok() ? *ptr : nullptr;
  }
  void Free(void* ptr) override { CudaFree(ptr); }
  void Upload(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) {
      EXPECT_TRUE(cuda::CopyToDevice(dst, host, bytes).ok());
    }
  }
  void Download(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) {
      EXPECT_TRUE(cuda::CopyToHost(host, src, bytes).ok());
    }
  }
};

Backend NcclBackend() {
  return Backend{"nccl",
                 CommDevice::kCuda,
                 [](int ranks) { return cuda::DeviceCount() >= ranks; },
                 [] { return std::make_unique<DeviceSpace>(); },
                 HostTransport::kAuto,
                 "nccl"};
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Nccl, CommConformance,
                         ::testing::Combine(::testing::Values(NcclBackend()),
                                            ::testing::Values(1, 2, 4, 8)),
                         ConformanceName);

INSTANTIATE_TEST_SUITE_P(Nccl, CommFaults, ::testing::Values(NcclBackend()),
                         FaultsName);

}  // namespace zshard::comm::testing
