// BlockingCallPool: every task runs, at most `threads` at once, and the
// destructor runs what is still queued before it returns.
#include "server/service/blocking_call_pool.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zshard::server {
namespace {

TEST(BlockingCallPoolTest, AtMostItsThreadsRunAtOnceAndEveryTaskRuns) {
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  absl::Notification release;
  {
    BlockingCallPool pool(3);
    for (int i = 0; i < 50; ++i) {
      pool.Submit([&] {
        const int now = running.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        release.WaitForNotification();
        running.fetch_sub(1);
        done.fetch_add(1);
      });
    }
    // Three block until released; the other 47 wait in the queue.
    while (running.load() < 3) std::this_thread::yield();
    EXPECT_EQ(done.load(), 0);
    release.Notify();
  }  // the destructor runs the rest
  EXPECT_EQ(done.load(), 50);
  EXPECT_EQ(most.load(), 3);
}

}  // namespace
}  // namespace zshard::server
