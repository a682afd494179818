// A few threads for the blocking part of unary calls answered on gRPC's
// callback API (Join, AckTransition, Leave: each takes the membership's
// lock and waits for its store write). On gRPC's synchronous API each call
// in flight holds a thread of its own, so the ack storm of a transition's
// phase at thousands of members (every member acks at once) makes
// thousands of threads, which wait on one lock and crowd out the few
// threads that answer heartbeats. Here such a storm queues; the pool's
// threads take the calls in arrival order, and their store writes still
// share transactions (StoreWriter's group commit).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zshard::server {

// Thread-safe.
class BlockingCallPool {
 public:
  // `threads` >= 1.
  explicit BlockingCallPool(int threads);
  // Runs every task still queued, then joins the threads.
  ~BlockingCallPool();
  BlockingCallPool(const BlockingCallPool&) = delete;
  BlockingCallPool& operator=(const BlockingCallPool&) = delete;

  // Queues `task`; one of the threads runs it.
  void Submit(std::function<void()> task);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace zshard::server
