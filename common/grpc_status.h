// Conversion between absl::Status and grpc::Status: the only place in the
// tree where one becomes the other. Codes map one to one (both follow the
// canonical gRPC code space).
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace zshard {

// The gRPC status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The absl status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace zshard
