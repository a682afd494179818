// The coordinator's --store flag: which StateStore holds its state.
//   sqlite:DIR                            DIR/coordinator.db (--state-dir DIR)
//   etcd:HOST:PORT[,HOST:PORT...]/PREFIX  keys under /PREFIX/ on that etcd
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/state/state_store.h"
#include "server/store/etcd_state_store.h"
#include "server/store/http_request.h"
#include "server/store/leader_election.h"

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

struct StoreOpenOptions {
  // etcd: the value of this coordinator's campaign key (who leads).
  std::string candidate_id = "zshard-coordinator";
  // etcd: the campaign lease's TTL; a killed leader's successor waits at
  // most this long for it to expire.
  int64_t lease_ttl_s = 5;
  // etcd: TLS files (all empty: plain HTTP; see EtcdClientOptions::tls).
  HttpTlsOptions etcd_tls;
  // etcd: campaign and wait to lead (below). False: the store is opened
  // unfenced and OpenedStore::election stays null; the caller campaigns
  // (ElectionOptionsFor) and fences the store once it leads.
  bool campaign = true;
};

struct OpenedStore {
  std::unique_ptr<StateStore> store;
  // etcd only: this coordinator's campaign, leading; the store's writes are
  // fenced by its key. Destroying it resigns.
  std::unique_ptr<LeaderElection> election;
  // etcd only: `store` as what it is (SetFence).
  EtcdStateStore* etcd = nullptr;
};

// The election of an etcd spec's prefix, with options' candidate id, TTL
// and TLS.
LeaderElectionOptions ElectionOptionsFor(const StoreSpec& spec,
                                         const StoreOpenOptions& options);

// Opens the store. SQLite: SqliteStateStore::Open (the directory's lock is
// the one-coordinator guard). etcd: EtcdStateStore::Open, which reaches
// etcd first (Unavailable naming the endpoint when it cannot), then
// campaigns on the prefix and waits up to lease_ttl_s + 2 s to lead:
// FailedPrecondition naming the leader when another coordinator keeps the
// prefix.
absl::StatusOr<OpenedStore> OpenStateStore(const StoreSpec& spec,
                                           const StoreOpenOptions& options);

}  // namespace zshard::server
