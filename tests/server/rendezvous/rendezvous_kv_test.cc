// The epoch-scoped rendezvous store: isolation between epochs, blocking
// reads with deadlines, size bounds, garbage collection and shutdown.
#include "server/rendezvous/rendezvous_kv.h"

#include <thread>

#include "gtest/gtest.h"

namespace zshard::server {
namespace {

TEST(RendezvousKvTest, EpochsNeverSeeEachOthersKeys) {
  RendezvousKv kv;
  ASSERT_TRUE(kv.Set(3, "id", "old").ok());
  auto got = kv.Get(4, "id", absl::Milliseconds(5), nullptr);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(kv.Set(4, "id", "new").ok());
  EXPECT_EQ(*kv.Get(4, "id", absl::ZeroDuration(), nullptr), "new");
  EXPECT_EQ(*kv.Get(3, "id", absl::ZeroDuration(), nullptr), "old");
  kv.DropBefore(4);
  EXPECT_FALSE(kv.Get(3, "id", absl::ZeroDuration(), nullptr).ok());
  EXPECT_EQ(kv.TotalBytes(), 5u);  // "id" + "new"
}

TEST(RendezvousKvTest, WaitIsReleasedBySetAndBoundedByDeadline) {
  RendezvousKv kv;
  std::thread setter([&] {
    EXPECT_TRUE(kv.Set(1, "a", "1").ok());
    EXPECT_TRUE(kv.Set(1, "b", "2").ok());
  });
  EXPECT_TRUE(kv.Wait(1, {"a", "b"}, absl::Seconds(10), nullptr).ok());
  setter.join();
  EXPECT_EQ(kv.Wait(1, {"a", "c"}, absl::Milliseconds(5), nullptr).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(kv.Wait(1, {"c"}, absl::Seconds(10), [] { return true; }).code(),
            absl::StatusCode::kCancelled);
}

TEST(RendezvousKvTest, SizesAreBounded) {
  RendezvousOptions o;
  o.max_keys_per_epoch = 2;
  o.max_total_bytes = 100;
  RendezvousKv kv(o);
  EXPECT_EQ(kv.Set(1, "", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set(1, std::string(513, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set(1, "k", std::string((1 << 20) + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv.Set(1, "a", "1").ok());
  ASSERT_TRUE(kv.Set(1, "b", "1").ok());
  ASSERT_TRUE(kv.Set(1, "b", "2").ok());  // replacing is fine
  EXPECT_EQ(kv.Set(1, "c", "1").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.Set(2, "big", std::string(200, 'v')).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(RendezvousKvTest, ShutdownReleasesWaiters) {
  RendezvousKv kv;
  std::thread stopper([&] { kv.Shutdown(); });
  EXPECT_EQ(kv.Wait(1, {"never"}, absl::Seconds(30), nullptr).code(),
            absl::StatusCode::kUnavailable);
  stopper.join();
}

}  // namespace
}  // namespace zshard::server
