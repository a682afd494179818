// BlockingCallPool: a queue and its threads.
#include "server/service/blocking_call_pool.h"

#include <algorithm>
#include <utility>

#include "common/thread_priority.h"
#include "server/service/heartbeat_lane.h"

namespace zshard::server {

BlockingCallPool::BlockingCallPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] {
      // Below the heartbeat lane: a storm of these calls must not starve
      // the heartbeats of CPU (heartbeat_lane.h).
      LowerThisThreadPriority(kBackgroundNice);
      Loop();
    });
  }
}

BlockingCallPool::~BlockingCallPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void BlockingCallPool::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void BlockingCallPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace zshard::server
