// The host backend (named "gloo" in telemetry and flags): a Communicator
// over host memory, running the host collectives (host_collectives.h) on
// Gloo's TCP transport or, for ranks on one host, on shared memory, which
// uses no Gloo (CommOptions::host_transport).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/worker/comm/communicator.h"

namespace zshard::comm {

// Creates the host communicator of options.rank; blocks in the rendezvous
// (kAuto: the shared-memory one, then Gloo's when the ranks are not all on
// this host).
// Requires options already validated (ValidateCommOptions).
absl::StatusOr<std::unique_ptr<Communicator>> CreateHostCommunicator(
    const CommOptions& options);

}  // namespace zshard::comm
