// The state stores the store tests run over: SQLite in a temp dir, etcd
// (one server per test binary, started on first use) under a fresh prefix,
// and MemoryStateStore (its maps outlive each opened handle).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/state/state_store.h"
#include "server/store/memory_state_store.h"
#include "tests/testing/temp_dir.h"

namespace zshard::server::testing {

enum class StoreKind { kSqlite, kEtcd, kMemory };

// For INSTANTIATE_TEST_SUITE_P: "Sqlite", "Etcd", "Memory".
std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info);

// Every kind, for ::testing::ValuesIn.
inline constexpr StoreKind kStoreKinds[] = {
    StoreKind::kSqlite, StoreKind::kEtcd, StoreKind::kMemory};

// Why stores of `kind` cannot run here (etcd not installed); empty if they
// can.
std::string StoreSkipReason(StoreKind kind);

// One store's durable place (a directory or an etcd prefix). Open may be
// called again once the previous store is gone: a coordinator restart.
class StoreLocation {
 public:
  explicit StoreLocation(StoreKind kind);
  absl::StatusOr<std::unique_ptr<StateStore>> Open();
  // The etcd endpoint of the shared server (etcd only).
  static std::string EtcdEndpoint();
  const std::string& prefix() const { return prefix_; }

 private:
  StoreKind kind_;
  zshard::testing::TempDir dir_;
  std::string prefix_;
  std::shared_ptr<MemoryStateStore> memory_;
};

// A test over each store kind (the parameter): skipped where the kind
// cannot run; Open opens (or, after the last one is gone, reopens) its store.
class StoreParamTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    const std::string skip = StoreSkipReason(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  std::unique_ptr<StateStore> Open() {
    auto store = location_.Open();
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  StoreLocation location_{GetParam()};
};

// A test against the shared etcd server (skipped without etcd): its
// endpoint and a fresh prefix.
class EtcdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string skip = StoreSkipReason(StoreKind::kEtcd);
    if (!skip.empty()) GTEST_SKIP() << skip;
    endpoint_ = StoreLocation::EtcdEndpoint();
    prefix_ = StoreLocation(StoreKind::kEtcd).prefix();
  }
  std::string endpoint_;
  std::string prefix_;
};

}  // namespace zshard::server::testing
