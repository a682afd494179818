// The baseline of `zshard-bench collectives --device cuda`: the same
// collectives as raw NCCL calls, timed the way the bench times the
// Communicator, so that the two can be compared in one run. No CUDA types
// here; without CUDA the call is Unimplemented (raw_nccl_none.cc).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/comm/dtype.h"

namespace zshard::bench {

// Runs `ranks` threads, rank r on CUDA device r with its own stream and a
// blocking NCCL communicator (ncclCommInitRank, one id shared in-process).
// Each rank times ncclReduceScatter (a buffer of count * ranks elements to
// one of `count`), ncclAllGather (back) and an in-place ncclAllReduce of
// the whole buffer, in `dtype`, each followed by cudaStreamSynchronize and
// preceded by a barrier of the threads: one warm-up, then `iters` timed.
// Returns seconds, times[rank][op * iters + iter] with ops in that order.
// Unavailable on a CUDA or NCCL error; Unimplemented without CUDA.
absl::StatusOr<std::vector<std::vector<double>>> TimeRawNccl(
    int ranks, size_t count, comm::DataType dtype, int iters);

}  // namespace zshard::bench
