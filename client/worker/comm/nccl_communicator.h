// The NCCL backend: a Communicator over CUDA device memory with a
// non-blocking NCCL communicator, its own stream, and a unique id exchanged
// through the group's KvStore. Declared without CUDA headers.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/comm/communicator.h"

namespace zshard::comm {

// Creates the NCCL communicator of options.rank on options.cuda_device.
// Rank 0 publishes the unique id under "nccl/<group>/id"; the others wait
// for it. Blocks until NCCL's initialisation finishes or the timeout
// passes (DeadlineExceeded; the half-made communicator is aborted).
// Requires options already validated (ValidateCommOptions).
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const CommOptions& options);

}  // namespace zshard::comm
