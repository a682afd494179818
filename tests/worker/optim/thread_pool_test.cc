// Tests of the fork-join ThreadPool: every index runs exactly once per Run,
// on distinct threads, and runs can repeat.
#include "client/worker/optim/thread_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zshard::optim {
namespace {

TEST(ThreadPoolTest, RunsEachIndexOnceOnDistinctThreads) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int round = 0; round < 100; ++round) {
    std::vector<std::atomic<int>> hits(4);
    std::mutex mu;
    std::set<std::thread::id> ids;
    pool.Run(4, [&](int i) {
      hits[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    for (int i = 0; i < 4; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
    ASSERT_EQ(ids.size(), 4u);
  }
}

TEST(ThreadPoolTest, ClampsTheWorkerCount) {
  ThreadPool pool(3);
  std::atomic<int> calls{0};
  std::atomic<int> max_index{-1};
  pool.Run(10, [&](int i) {
    calls.fetch_add(1);
    int seen = max_index.load();
    while (i > seen && !max_index.compare_exchange_weak(seen, i)) {
    }
  });
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(max_index.load(), 2);
  calls = 0;
  pool.Run(0, [&](int i) {
    EXPECT_EQ(i, 0);
    calls.fetch_add(1);
  });
  EXPECT_EQ(calls.load(), 1);
  calls = 0;
  pool.Run(2, [&](int) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadPoolTest, SingleThreadPoolRunsOnCaller) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), 1);
  std::thread::id id;
  pool.Run(4, [&](int) { id = std::this_thread::get_id(); });
  EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace zshard::optim
