// How a binary's absl::Mutex locks run. Debian's abseil is built without
// NDEBUG, so by default every absl::Mutex, gRPC's own locks included, keeps
// a process-wide lock-order graph behind one global lock: in a 16,384-member
// join storm that bookkeeping alone took 7% of both processes' CPU
// (coordinator and zshard-loadgen, perf). The binaries turn it off first
// thing in main; unit tests keep it, so that a lock-order inversion still
// aborts there.
#pragma once

namespace zshard {

// Turns off absl's mutex deadlock detection for this process unless the
// environment has ZSHARD_MUTEX_DEADLOCK_CHECK=1. Call at the start of main,
// before any thread starts.
void SetBinaryMutexMode();

}  // namespace zshard
