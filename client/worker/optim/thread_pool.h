// A small persistent pool of threads that run one function on every worker
// index at once (fork-join), for kernels that split a flat range between
// threads. Cheaper than spawning threads per step.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zshard::optim {

// Owns num_threads - 1 background threads; the calling thread is worker 0.
// Run() calls are serialised (one fork-join at a time); the pool is safe to
// share between threads. Destruction joins the threads.
class ThreadPool {
 public:
  // num_threads < 1 is treated as 1 (no background threads).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(i) for every i in [0, n) with n clamped to [1, num_threads()],
  // each on a different thread (fn(0) on the caller), and returns when all
  // have returned. fn must not call Run() on the same pool.
  void Run(int n, const std::function<void(int)>& fn);

 private:
  void WorkerLoop(int index);

  const int num_threads_;
  absl::Mutex run_mu_;  // serialises Run()
  absl::Mutex mu_;
  const std::function<void(int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int active_ ABSL_GUARDED_BY(mu_) = 0;   // workers taking part in this run
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // background workers not yet done
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace zshard::optim
