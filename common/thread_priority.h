// Lowers the scheduling priority of the calling thread (its nice value),
// for background work that must yield the CPU to latency-bound threads of
// the same process on a busy machine. Raising a nice value needs no
// privilege.
#pragma once

namespace zshard {

// Adds `increment` (> 0) to the calling thread's nice value; best effort
// (an error leaves it as it was).
void LowerThisThreadPriority(int increment);

}  // namespace zshard
