// GradientStream: one step's gradients handed from a workload that produces
// them bucket by bucket (a trainer's backward pass: the last layers' buckets
// complete first, docs/design.md section 10) to the engine's reduce-scatter,
// which runs on its own thread while the rest of backward goes on.
//
// The reduce-scatters run in the engine's window order on every rank, not
// in the order buckets complete, so every rank issues its collectives in
// the same order whatever its trainer does; a bucket that completes early
// waits for the ones before it. Each window's reduction is independent of
// when it runs, so the result is bit-identical to reducing after the
// whole backward pass.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/engine/engine_buffers.h"

namespace zshard::engine {

// Thread-safe: one producer thread (the workload) and one consumer thread
// (the engine's reducer).
class GradientStream {
 public:
  // `buffers` must outlive the stream.
  explicit GradientStream(EngineBuffers* buffers);

  // --- the producer (the workload's thread) ---

  // Bucket `bucket` of buffer `buffer` holds its final gradients for this
  // step. InvalidArgument for a bucket the plan does not have; a bucket
  // marked again, or already reduced, is ignored.
  absl::Status MarkReady(int buffer, int bucket);

  // The producer lost the gradients it was writing (its process died) and
  // will write every gradient again from zero: waits for the reduction in
  // flight, keeps a copy of every window already reduced (their buckets
  // were final, so their reduced values are too) and forgets which other
  // buckets were ready. Fails only when a copy fails.
  absl::Status Restart();

  // Every gradient is final: puts back the windows Restart kept and marks
  // every bucket ready.
  absl::Status Finish();

  // Ends the stream without gradients (the producer failed): the consumer
  // stops waiting.
  void Cancel();

  // This step's gradients must not be applied: the step is skipped on
  // every rank (the engine counts a non-finite gradient at the commit
  // point), so what was already reduced is never used.
  void Discard();
  bool discarded() const;

  // Windows reduced so far (what a Restart keeps).
  int reduced_windows() const;

  // --- the consumer (the engine's reducer) ---

  // The number of windows, in the engine's order (EngineBuffers::windows).
  int windows() const { return static_cast<int>(window_of_.size()); }

  // Waits until window `w`'s bucket is ready; Cancelled after Cancel.
  absl::Status WaitReady(int w);

  // The reducer is done with window `w`: `reduced` when it holds its
  // reduced gradients, false when its reduction failed (the step fails).
  void Done(int w, bool reduced);

  // Waits until the windows a Restart kept are back in the grads (Finish),
  // before anything past the reduce-scatters reads them (the all-reduce
  // across instances); at once when nothing was kept. Cancelled after
  // Cancel.
  absl::Status WaitRestored();

 private:
  EngineBuffers* const buffers_;
  std::map<std::pair<int, int>, int> window_of_;  // (buffer, bucket) -> w

  mutable absl::Mutex mu_;
  std::vector<bool> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> reduced_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = -1;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool discarded_ ABSL_GUARDED_BY(mu_) = false;
  // Restart kept windows that Finish has not put back yet.
  bool restore_pending_ ABSL_GUARDED_BY(mu_) = false;
  // Reduced windows kept across a Restart (host copies of their grads).
  std::map<int, std::vector<char>> kept_;  // producer thread only
};

}  // namespace zshard::engine
