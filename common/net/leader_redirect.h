// The contract between standby coordinators and their clients (docs/design.md
// section 11). Several coordinators on one etcd prefix elect one leader;
// the others are standbys. A standby answers every RPC of the worker,
// rendezvous, admin and dashboard services with UNAVAILABLE, the message
// "standby coordinator: the leader is HOST:PORT" (followed by ", its
// dashboard http://HOST:PORT/" when the leader serves an HTTP port; "...
// no leader yet" when none is known), and the leader's advertised address
// in the trailing metadata under kLeaderMetadataKey (absent while no
// leader is known), its HTTP address under kLeaderHttpMetadataKey. Its
// gRPC health reports those services NOT_SERVING (the overall "" service
// stays SERVING: the process is alive), so a Kubernetes Service whose
// readiness probe asks for kLeaderHealthService routes only to the leader.
//
// Clients (zshard-worker, zshardctl, zshard-loadgen) take a comma-separated
// list of coordinator addresses; on UNAVAILABLE they switch to the address
// the metadata names, or else to the next one in the list.
#pragma once

namespace zshard::net {

// Trailing metadata key naming the leader's advertised HOST:PORT.
inline constexpr char kLeaderMetadataKey[] = "zshard-leader";

// Trailing metadata key naming the leader's advertised HTTP HOST:PORT (its
// dashboard at http://HOST:PORT/); absent when it has no HTTP port.
inline constexpr char kLeaderHttpMetadataKey[] = "zshard-leader-http";

// The gRPC health service name that is SERVING only on the leader.
inline constexpr char kLeaderHealthService[] = "zshard.v1.WorkerService";

}  // namespace zshard::net
