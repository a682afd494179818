// The bounds of TCP loopback on this machine, measured in the same run as
// the collectives: one stream, and a full mesh of processes that move
// exactly a reduce-scatter's bytes with nothing else to do.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace zshard::bench {

// One loopback TCP stream: bytes per second of `total` bytes sent in 8 MiB
// writes (the torch baseline measures its stream the same way). 0 when a
// socket call fails.
double MeasureTcpStream(size_t total);

// `ranks` forked processes connected by loopback TCP in a full mesh; each
// sends `bytes_per_peer` bytes to every peer and receives as many from every
// peer, with non-blocking sockets and poll(2), receiving into a 256 KiB
// window per peer (no reduction, no framing, no library in between). That
// is the traffic of a reduce-scatter of ranks * bytes_per_peer bytes per
// rank. Returns the median over `iters` rounds (after one warm-up) of the
// slowest rank's bytes sent per second, (ranks-1) * bytes_per_peer / time:
// the most bus bandwidth any TCP reduce-scatter of that size can reach here.
// Call only before this process starts threads or after it joined them.
absl::StatusOr<double> MeasureTcpMeshBound(int ranks, size_t bytes_per_peer,
                                           int iters);

}  // namespace zshard::bench
