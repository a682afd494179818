// The bound a CPU AdamW step is compared with: the same loads and stores
// over the same buffers, on the same threads, with no arithmetic.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace zshard::bench {

// The buffers of one AdamW step over n params (bf16 grads and params).
struct AdamTraffic {
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const uint16_t* grad = nullptr;
  uint16_t* param = nullptr;
  int64_t n = 0;
};

struct AdamBoundOptions {
  int threads = 1;                 // threads of a persistent pool
  int64_t chunk_elements = 65536;  // claimed from a shared counter, as CpuAdam
  int repeats = 10;                // best of this many passes
};

// The fastest pass, in seconds, of a kernel that moves exactly an AdamW
// step's bytes: master, m and v read and written back (fp32), the grad
// read and the param written (16-bit), with a zero added where the step
// computes. Its threads claim the same chunks as CpuAdam's and store the
// same way (plain stores), so no AdamW step over these buffers can be
// faster: the step's time over this one's is a fraction that cannot
// exceed 1. master, m and v keep their values (up to the sign of a zero);
// the param gets the grad's bits.
absl::StatusOr<double> MeasureAdamBoundSeconds(const AdamTraffic& buffers,
                                               const AdamBoundOptions& options);

}  // namespace zshard::bench
