// StoreLocation: SQLite dirs and etcd prefixes on a shared test etcd.
#include "tests/server/store/store_backends.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/etcd_state_store.h"
#include "server/store/locked_state_store.h"
#include "server/store/sqlite_state_store.h"
#include "tests/testing/etcd_server.h"

namespace zshard::server::testing {
namespace {

using zshard::testing::EtcdServer;

// The binary's etcd, started on first use and killed (SIGKILL) at exit.
EtcdServer* SharedEtcd() {
  static EtcdServer* server = [] {
    auto started = EtcdServer::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return static_cast<EtcdServer*>(nullptr);
    }
    static std::unique_ptr<EtcdServer> owner = *std::move(started);
    return owner.get();
  }();
  return server;
}

}  // namespace

std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info) {
  switch (info.param) {
    case StoreKind::kSqlite:
      return "Sqlite";
    case StoreKind::kEtcd:
      return "Etcd";
    case StoreKind::kMemory:
      return "Memory";
  }
  return "Unknown";
}

std::string StoreSkipReason(StoreKind kind) {
  if (kind == StoreKind::kEtcd && EtcdServer::Binary().empty()) {
    return "etcd is not installed (deploy/install-deps.sh installs "
           "etcd-server)";
  }
  return "";
}

StoreLocation::StoreLocation(StoreKind kind) : kind_(kind) {
  static std::atomic<int> next{0};
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  prefix_ = absl::StrCat("/zshard-test/", getpid(), "/",
                         test != nullptr ? test->name() : "none", "-", next++);
}

std::string StoreLocation::EtcdEndpoint() {
  EtcdServer* etcd = SharedEtcd();
  return etcd == nullptr ? "127.0.0.1:1" : etcd->endpoint();
}

absl::StatusOr<std::unique_ptr<StateStore>> StoreLocation::Open() {
  if (kind_ == StoreKind::kSqlite) {
    auto store = SqliteStateStore::Open(dir_.File("state"));
    if (!store.ok()) return store.status();
    return std::unique_ptr<StateStore>(*std::move(store));
  }
  if (kind_ == StoreKind::kMemory) {
    // A handle on the location's maps: a "restart" finds what was written.
    if (memory_ == nullptr) memory_ = std::make_shared<MemoryStateStore>();
    return std::unique_ptr<StateStore>(
        std::make_unique<LockedStateStore>(memory_.get()));
  }
  EtcdStateStoreOptions options;
  options.client.endpoints = {EtcdEndpoint()};
  options.prefix = prefix_;
  auto store = EtcdStateStore::Open(std::move(options));
  if (!store.ok()) return store.status();
  return std::unique_ptr<StateStore>(*std::move(store));
}

}  // namespace zshard::server::testing
