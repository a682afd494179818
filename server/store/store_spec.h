// The coordinator's --store flag: which StateStore holds its state.
//   sqlite:DIR                            DIR/coordinator.db (--state-dir DIR)
//   etcd:HOST:PORT[,HOST:PORT...]/PREFIX  keys under /PREFIX/ on that etcd
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/state_store.h"

namespace zshard::server {

struct StoreSpec {
  enum class Kind { kSqlite, kEtcd };
  Kind kind = Kind::kSqlite;
  std::string dir;                     // kSqlite
  std::vector<std::string> endpoints;  // kEtcd: HOST:PORT each
  std::string prefix;                  // kEtcd: "/PREFIX" (no trailing '/')
};

// InvalidArgument naming the problem: an unknown kind, an empty directory,
// no or a malformed endpoint, an empty prefix.
absl::StatusOr<StoreSpec> ParseStoreSpec(const std::string& text);

// Opens the store (SqliteStateStore::Open or EtcdStateStore::Open, which
// reaches etcd before returning: Unavailable naming the endpoint when it
// cannot).
absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(
    const StoreSpec& spec);

}  // namespace zshard::server
