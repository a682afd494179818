// Tests of the directory-backed KvStore.
#include "client/worker/comm/file_kv_store.h"

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zshard::comm {
namespace {

// A fresh directory, removed with its files when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/zshard_file_kv_XXXXXX";
    const char* dir = mkdtemp(tmpl);
    path_ = dir == nullptr ? "" : dir;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(FileKvStoreTest, SetThenGetAcrossInstances) {
  TempDir temp;
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  FileKvStore writer(dir);
  FileKvStore reader(dir);
  ASSERT_TRUE(writer.Set("group/rank 0", std::string("a\0b", 3)).ok());
  auto value = reader.Get("group/rank 0", 0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("a\0b", 3));
  ASSERT_TRUE(writer.Set("group/rank 0", "replaced").ok());
  EXPECT_EQ(*reader.Get("group/rank 0", 0), "replaced");
}

TEST(FileKvStoreTest, GetBlocksUntilSet) {
  TempDir temp;
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  FileKvStore store(dir);
  absl::Notification asking;
  std::thread setter([&] {
    asking.WaitForNotification();
    ASSERT_TRUE(store.Set("late", "1").ok());
  });
  asking.Notify();
  auto value = store.Get("late", 10000);
  setter.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "1");
  EXPECT_TRUE(store.Wait({"late"}, 0).ok());
}

TEST(FileKvStoreTest, GetAndWaitTimeOut) {
  TempDir temp;
  const std::string& dir = temp.path();
  ASSERT_FALSE(dir.empty());
  FileKvStore store(dir);
  ASSERT_TRUE(store.Set("a", "x").ok());
  EXPECT_EQ(store.Get("b", 20).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.Wait({"a", "b"}, 20).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(FileKvStoreTest, MissingDirectoryFailsSet) {
  FileKvStore store("/nonexistent/zshard_file_kv");
  EXPECT_FALSE(store.Set("a", "x").ok());
}

}  // namespace
}  // namespace zshard::comm
