// DirLock: one holder per directory; the holder's pid in the refusal; free
// again once released.
#include "server/store/dir_lock.h"

#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_state_store.h"
#include "tests/testing/temp_dir.h"

namespace zshard::server {
namespace {

using ::testing::HasSubstr;

TEST(DirLockTest, OneHolderAtATime) {
  zshard::testing::TempDir tmp;
  auto first = DirLock::Acquire(tmp.path());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = DirLock::Acquire(tmp.path());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("held by another coordinator (pid " +
                        std::to_string(getpid()) + ")"));
  first->reset();
  EXPECT_TRUE(DirLock::Acquire(tmp.path()).ok());
}

TEST(DirLockTest, TheStoreHoldsItsDirectory) {
  zshard::testing::TempDir tmp;
  auto store = SqliteStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(SqliteStateStore::Open(tmp.path()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  store->reset();
  EXPECT_TRUE(SqliteStateStore::Open(tmp.path()).ok());
}

}  // namespace
}  // namespace zshard::server
