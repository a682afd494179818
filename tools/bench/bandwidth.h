// The machine's streaming memory bandwidth, measured with a multi-threaded
// STREAM-style triad: the bound a memory-bound kernel is compared with.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace zshard::bench {

struct TriadOptions {
  int threads = 1;                      // threads sharing the arrays
  int64_t elements = int64_t{8} << 20;  // doubles per array (64 MiB)
  int repeats = 10;                     // best of this many passes
};

// a[i] = b[i] + s * c[i] over three arrays of doubles, split between
// `threads` threads of a persistent pool. Returns the best pass's bytes per
// second counted as STREAM does: 24 bytes per element (two reads, one
// write; write-allocate traffic not counted).
absl::StatusOr<double> MeasureTriadBytesPerSecond(const TriadOptions& options);

}  // namespace zshard::bench
