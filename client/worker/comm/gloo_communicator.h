// The Gloo backend: a Communicator over host memory, running the host
// collectives (host_collectives.h) on Gloo's TCP transport or, for ranks on
// one host, on shared memory (CommOptions::host_transport).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/comm/communicator.h"

namespace zshard::comm {

// Creates the Gloo communicator of options.rank; blocks in the rendezvous
// (kAuto: the shared-memory one, then Gloo's when the ranks are not all on
// this host).
// Requires options already validated (ValidateCommOptions).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const CommOptions& options);

}  // namespace zshard::comm
