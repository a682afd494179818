// Fork-join thread pool: workers sleep on a generation counter and wake for
// each Run().
#include "client/worker/optim/thread_pool.h"

#include <algorithm>

namespace zshard::optim {

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)) {
  threads_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Run(int n, const std::function<void(int)>& fn) {
  n = std::clamp(n, 1, num_threads_);
  absl::MutexLock run_lock(&run_mu_);
  if (n > 1) {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    active_ = n;
    pending_ = n - 1;
    ++generation_;
  }
  fn(0);
  if (n > 1) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &pending_));
    fn_ = nullptr;
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* fn = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&woken));
      if (stop_) return;
      seen = generation_;
      if (index >= active_) continue;
      fn = fn_;
    }
    (*fn)(index);
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace zshard::optim
