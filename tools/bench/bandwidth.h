// The bound a CPU AdamW step is compared with: the same loads and stores
// over the same buffers, on the same threads, with no arithmetic.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace zshard::optim {
class ThreadPool;
}  // namespace zshard::optim

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

// A kernel that moves exactly an AdamW step's bytes: master, m and v read
// and written back (fp32), the grad read and the param written (16-bit),
// with a zero added where the step computes, in vectors as wide as
// CpuAdam's. Its threads claim the same chunks as CpuAdam's and store the
// same way (plain stores), so no AdamW step over these buffers can be
// faster: the step's time over this one's fastest pass is a fraction that
// cannot exceed 1 but by noise. The bench interleaves its passes with the
// steps it times, so both see the same machine. master, m and v keep their
// values (up to the sign of a zero); the param gets the grad's bits.
class AdamBound {
 public:
  // InvalidArgument unless threads, chunk_elements and n are >= 1.
  static absl::StatusOr<std::unique_ptr<AdamBound>> Create(
      const AdamTraffic& buffers, int threads, int64_t chunk_elements = 65536);
  ~AdamBound();
  AdamBound(const AdamBound&) = delete;
  AdamBound& operator=(const AdamBound&) = delete;

  // One pass over the buffers; returns its seconds.
  double Pass();

 private:
  AdamBound(const AdamTraffic& buffers, int threads, int64_t chunk_elements);

  const AdamTraffic buffers_;
  const int threads_;
  const int64_t chunk_elements_;
  float zero_;
  std::unique_ptr<optim::ThreadPool> pool_;
};

}  // namespace zshard::bench
