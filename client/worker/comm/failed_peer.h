// The peer a failed operation could not reach, carried on the failure's
// Status as a payload: transports name the rank in their group, the engine
// turns that into the epoch rank, and the worker's report tells the
// coordinator which link broke (docs/design.md, "Network faults").
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace zshard::comm {

struct FailedPeer {
  // The communicator group the link belongs to (its rendezvous name).
  std::string group;
  // The peer's rank: in `group` on a transport's status, in the epoch on an
  // engine's (see kEpochPeerPayload).
  int rank = -1;
  // The peer's connection closed or was reset, or its process is gone (as
  // opposed to a link that timed out or has no route).
  bool closed = false;
};

// Payload keys: a transport's failure names its group's rank; the engine
// adds the epoch rank of the same peer.
inline constexpr char kPeerPayload[] = "type.zshard/peer";
inline constexpr char kEpochPeerPayload[] = "type.zshard/epoch-peer";

// `status` (not OK) with `peer` under `key`; an OK status is returned as is.
absl::Status WithFailedPeer(absl::Status status, const FailedPeer& peer,
                            const char* key = kPeerPayload);

// The peer named under `key` by `status`, if any.
std::optional<FailedPeer> FailedPeerOf(const absl::Status& status,
                                       const char* key = kPeerPayload);

// A copy of `status` with message `message` and every payload kept.
absl::Status WithMessage(const absl::Status& status, std::string message);

// Whether a transport's error text says that the peer's connection closed
// or was reset (rather than timed out or unreachable).
bool SaysPeerClosed(const std::string& message);

}  // namespace zshard::comm
