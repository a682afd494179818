// A small client of etcd's v3 API through its JSON gateway (HTTP POST of
// /v3/kv/range, /v3/kv/txn, /v3/lease/...; etcd 3.4 serves it on the client
// URL; see http_request.h): ranges, transactions with compares, and leases.
// Several endpoints: a request that cannot reach one (or that one answers
// Unavailable, e.g. without a raft leader) tries the next. Plain HTTP or
// TLS (a CA to verify etcd, a client certificate if etcd asks for one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/store/http_request.h"

namespace zshard::server {

struct EtcdClientOptions {
  // "host:port" of each etcd member's client URL; at least one.
  std::vector<std::string> endpoints;
  // Connecting to one endpoint gives up after this long.
  int64_t connect_timeout_ms = 2000;
  // A request's response (read and write) must come within this long.
  int64_t request_timeout_ms = 5000;
  // HTTPS to every endpoint when ca_file or cert_file is set (etcd's
  // --trusted-ca-file / --client-cert-auth side); plain HTTP otherwise.
  HttpTlsOptions tls;
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct EtcdRange {
  std::string key;
  // Empty: the single key; otherwise [key, range_end).
  std::string range_end;
  // 0: the latest revision; otherwise read as of this revision.
  int64_t revision = 0;
  // 0: no limit.
  int64_t limit = 0;
  // Sorted by key, descending (default ascending).
  bool descend = false;
};

struct EtcdRangeResult {
  std::vector<EtcdKeyValue> kvs;
  // The store's revision the range was read at.
  int64_t revision = 0;
  // More keys matched than `limit` returned.
  bool more = false;
};

struct EtcdCompare {
  enum class Target { kCreate, kMod, kVersion, kValue };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreate;
  Result result = Result::kEqual;
  // The revision (or version) compared with, for kCreate, kMod, kVersion.
  int64_t number = 0;
  // The value compared with, for kValue.
  std::string value;
};

struct EtcdOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  std::string range_end;  // kDelete, kRange: empty is the single key
  int64_t lease = 0;      // kPut: 0 is none
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key, std::string range_end = "");
  static EtcdOp Get(std::string key, std::string range_end = "");
};

struct EtcdTxnResult {
  // The compares held and `success` ran (else `failure` ran).
  bool succeeded = false;
  int64_t revision = 0;
  // One per kRange op of the branch that ran, in order.
  std::vector<EtcdRangeResult> ranges;
};

// Thread-safe. Errors name the endpoint: "etcd 127.0.0.1:2379 unreachable:
// connection refused" (Unavailable), or etcd's own error with its code.
class EtcdClient {
 public:
  // InvalidArgument when an endpoint is not HOST:PORT or there is none, or
  // a TLS file is unusable. Connects lazily: Create succeeds with etcd
  // down.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(
      EtcdClientOptions options);
  ~EtcdClient();

  absl::StatusOr<EtcdRangeResult> Range(const EtcdRange& range);
  // Every key starting with `prefix`, as of `revision` (0: latest).
  absl::StatusOr<EtcdRangeResult> RangePrefix(const std::string& prefix,
                                              int64_t revision = 0);
  absl::StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                                    const std::vector<EtcdOp>& success,
                                    const std::vector<EtcdOp>& failure = {});

  // A lease of `ttl_s` seconds; returns its id.
  absl::StatusOr<int64_t> Grant(int64_t ttl_s);
  // Renews the lease; returns its TTL in seconds. NotFound when the lease
  // expired or was revoked.
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  // Revokes the lease and deletes its keys (revoking a gone lease is OK).
  absl::Status Revoke(int64_t lease);

  // The end of the range of keys starting with `prefix`.
  static std::string PrefixEnd(const std::string& prefix);
  const std::vector<std::string>& endpoints() const {
    return options_.endpoints;
  }

 private:
  EtcdClient(EtcdClientOptions options, std::shared_ptr<HttpTls> tls);
  // POSTs `body` to `path`, trying each endpoint from the last good one.
  // Returns the response body of a 200.
  absl::StatusOr<std::string> Post(const std::string& path,
                                   const std::string& body);

  struct Endpoint {
    std::string address;  // as given
    std::string host;
    int port = 0;
  };
  const EtcdClientOptions options_;
  const std::shared_ptr<HttpTls> tls_;  // null: plain HTTP
  std::vector<Endpoint> endpoints_;
  absl::Mutex mu_;
  // The endpoint that answered last; requests start there.
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zshard::server
