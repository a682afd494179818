// The other process of cuda_ipc_gpu_test.cc:
//   cuda_ipc_peer HANDLE_HEX BYTES ORDINAL
// opens the exported allocation on device ORDINAL, checks that it holds the
// exporter's pattern, overwrites it with its own, closes the handle and
// exits 0; on any failure prints "error MESSAGE" and exits 1.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/device/cuda_ipc.h"
#include "common/status.h"
#include "tests/worker/device/shm_buffer_patterns.h"

namespace zshard::device {
namespace {

absl::Status Run(const std::string& hex, size_t bytes, int ordinal) {
  const std::string raw = absl::HexStringToBytes(hex);
  CudaIpcHandle handle;
  if (raw.size() != handle.bytes.size()) {
    return absl::InvalidArgumentError("the handle is not 64 bytes of hex");
  }
  std::copy(raw.begin(), raw.end(), handle.bytes.begin());
  ZSHARD_ASSIGN_OR_RETURN(void* ptr, OpenCudaIpcHandle(handle, ordinal));
  std::vector<uint8_t> host(bytes);
  absl::Status s = cuda::CopyToHost(host.data(), ptr, bytes);
  if (s.ok()) s = CheckPattern(host.data(), bytes, kOwnerSeed, "peer");
  if (s.ok()) {
    FillPattern(host.data(), bytes, kMapperSeed);
    s = cuda::CopyToDevice(ptr, host.data(), bytes);
  }
  const absl::Status closed = CloseCudaIpcHandle(ptr);
  return s.ok() ? closed : s;
}

}  // namespace
}  // namespace zshard::device

int main(int argc, char** argv) {
  size_t bytes = 0;
  int ordinal = -1;
  absl::Status s = argc == 4 && absl::SimpleAtoi(argv[2], &bytes) &&
                           absl::SimpleAtoi(argv[3], &ordinal)
                       ? zshard::device::Run(argv[1], bytes, ordinal)
                       : absl::InvalidArgumentError(
                             "usage: cuda_ipc_peer HANDLE_HEX BYTES ORDINAL");
  if (s.ok()) return 0;
  std::printf("error %s\n", std::string(s.message()).c_str());
  return 1;
}
