// --store parsing and opening.
#include "server/store/store_spec.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "server/store/etcd_state_store.h"
#include "server/store/sqlite_state_store.h"

namespace zshard::server {
namespace {

absl::Status Bad(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("store '", text, "': ", why));
}

bool IsHostPort(const std::string& e) {
  size_t colon = e.rfind(':');
  int port = 0;
  return colon != std::string::npos && colon > 0 &&
         absl::SimpleAtoi(e.substr(colon + 1), &port) && port > 0 &&
         port <= 65535;
}

}  // namespace

absl::StatusOr<StoreSpec> ParseStoreSpec(const std::string& text) {
  StoreSpec spec;
  if (absl::StartsWith(text, "sqlite:")) {
    spec.kind = StoreSpec::Kind::kSqlite;
    spec.dir = text.substr(7);
    if (spec.dir.empty()) return Bad(text, "the sqlite directory is empty");
    return spec;
  }
  if (!absl::StartsWith(text, "etcd:")) {
    return Bad(text,
               "must be sqlite:DIR or etcd:HOST:PORT[,HOST:PORT...]/PREFIX");
  }
  spec.kind = StoreSpec::Kind::kEtcd;
  const std::string rest = text.substr(5);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) {
    return Bad(text, "the etcd prefix is missing (etcd:HOST:PORT/PREFIX)");
  }
  std::string prefix = rest.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.empty()) return Bad(text, "the etcd prefix is empty");
  spec.prefix = std::move(prefix);
  for (absl::string_view e : absl::StrSplit(rest.substr(0, slash), ',')) {
    if (!IsHostPort(std::string(e))) {
      return Bad(text,
                 absl::StrCat("etcd endpoint '", e, "' is not HOST:PORT"));
    }
    spec.endpoints.emplace_back(e);
  }
  return spec;
}

LeaderElectionOptions ElectionOptionsFor(const StoreSpec& spec,
                                         const StoreOpenOptions& options) {
  LeaderElectionOptions election;
  election.client.endpoints = spec.endpoints;
  election.client.tls = options.etcd_tls;
  election.prefix = spec.prefix;
  election.id = options.candidate_id;
  election.ttl_s = options.lease_ttl_s;
  return election;
}

absl::StatusOr<OpenedStore> OpenStateStore(const StoreSpec& spec,
                                           const StoreOpenOptions& options) {
  OpenedStore opened;
  if (spec.kind == StoreSpec::Kind::kSqlite) {
    auto store = SqliteStateStore::Open(spec.dir);
    if (!store.ok()) return store.status();
    opened.store = *std::move(store);
    return opened;
  }
  EtcdClientOptions client;
  client.endpoints = spec.endpoints;
  client.tls = options.etcd_tls;
  EtcdStateStoreOptions store_options;
  store_options.client = client;
  store_options.prefix = spec.prefix;
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStateStore> store,
                          EtcdStateStore::Open(std::move(store_options)));
  opened.etcd = store.get();
  if (!options.campaign) {
    opened.store = std::move(store);
    return opened;
  }
  ZSHARD_ASSIGN_OR_RETURN(
      opened.election,
      LeaderElection::Campaign(ElectionOptionsFor(spec, options)));
  if (!opened.election->WaitForLeadership(
          absl::Seconds(options.lease_ttl_s + 2))) {
    absl::StatusOr<std::string> leader = opened.election->Leader();
    return absl::FailedPreconditionError(absl::StrCat(
        "etcd prefix '", spec.prefix, "' is led by another coordinator (",
        leader.ok() ? *leader : std::string(leader.status().message()), ")"));
  }
  std::optional<LeaderElection::Fence> fence = opened.election->LeadingFence();
  if (!fence.has_value()) {
    return absl::UnavailableError(
        absl::StrCat("lost the leadership of etcd prefix '", spec.prefix,
                     "' while starting"));
  }
  store->SetFence(fence->key, fence->create_revision);
  opened.store = std::move(store);
  return opened;
}

}  // namespace zshard::server
