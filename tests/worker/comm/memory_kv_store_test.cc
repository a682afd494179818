// Tests of the in-process KvStore.
#include "client/worker/comm/memory_kv_store.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

TEST(MemoryKvStoreTest, GetBlocksUntilSet) {
  MemoryKvStore store;
  absl::Notification asking;
  std::thread setter([&] {
    asking.WaitForNotification();
    ASSERT_TRUE(store.Set("a", "1").ok());
  });
  asking.Notify();
  auto value = store.Get("a", 10000);
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "1");
}

TEST(MemoryKvStoreTest, GetAndWaitTimeOut) {
  MemoryKvStore store;
  ASSERT_TRUE(store.Set("a", "x").ok());
  EXPECT_EQ(store.Get("b", 20).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.Wait({"a", "b"}, 20).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(store.Wait({"a"}, 20).ok());
}

TEST(MemoryKvStoreTest, SetReplaces) {
  MemoryKvStore store;
  ASSERT_TRUE(store.Set("k", "1").ok());
  ASSERT_TRUE(store.Set("k", "2").ok());
  EXPECT_EQ(*store.Get("k", 0), "2");
  EXPECT_EQ(store.size(), 1u);
}

}  // namespace
}  // namespace zshard::comm
