// The Gloo backend: a Communicator over host memory, running the host
// collectives (host_collectives.h) on Gloo's TCP transport.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/comm/communicator.h"

namespace zshard::comm {

// Creates the Gloo communicator of options.rank; blocks in the rendezvous.
// Requires options already validated (ValidateCommOptions).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const CommOptions& options);

}  // namespace zshard::comm
