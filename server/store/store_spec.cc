// --store parsing and opening.
#include "server/store/store_spec.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

absl::StatusOr<std::unique_ptr<StateStore>> OpenStateStore(
    const StoreSpec& spec) {
  if (spec.kind == StoreSpec::Kind::kSqlite) {
    auto store = SqliteStateStore::Open(spec.dir);
    if (!store.ok()) return store.status();
    return std::unique_ptr<StateStore>(*std::move(store));
  }
  EtcdStateStoreOptions options;
  options.client.endpoints = spec.endpoints;
  options.prefix = spec.prefix;
  auto store = EtcdStateStore::Open(std::move(options));
  if (!store.ok()) return store.status();
  return std::unique_ptr<StateStore>(*std::move(store));
}

}  // namespace zshard::server
