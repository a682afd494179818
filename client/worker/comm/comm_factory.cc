// CreateCommunicator and AllocateCommBuffer: pick the backend for a device.
// The only conditional compilation of the communicator lives here.
#include "absl/strings/str_cat.h"
#include "client/worker/comm/comm_buffer.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/host_communicator.h"
#if ZSHARD_HAVE_NCCL
#include "client/worker/comm/cuda_memory.h"
#include "client/worker/comm/nccl_communicator.h"
#endif

namespace zshard::comm {

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const CommOptions& options) {
  absl::Status valid = ValidateCommOptions(options);
  if (!valid.ok()) return valid;
  switch (options.device) {
    case CommDevice::kCpu:
      return CreateHostCommunicator(options);
    case CommDevice::kCuda:
#if ZSHARD_HAVE_NCCL
      return CreateNcclCommunicator(options);
#else
      return absl::UnimplementedError(
          "communicator device cuda: this build has no NCCL backend "
          "(configure with the CUDA toolkit and NCCL installed)");
#endif
  }
  return absl::InvalidArgumentError("communicator device is invalid");
}

absl::StatusOr<std::unique_ptr<CommBuffer>> AllocateCommBuffer(
    CommDevice device, int cuda_device, size_t bytes) {
  switch (device) {
    case CommDevice::kCpu:
      return AllocateHostCommBuffer(bytes);
    case CommDevice::kCuda:
#if ZSHARD_HAVE_NCCL
      return AllocateCudaCommBuffer(cuda_device, bytes);
#else
      (void)cuda_device;
      return absl::UnimplementedError(
          "cuda buffers: this build has no NCCL backend");
#endif
  }
  return absl::InvalidArgumentError("buffer device is invalid");
}

}  // namespace zshard::comm
