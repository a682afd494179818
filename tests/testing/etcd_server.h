// Local etcd (Debian's /usr/bin/etcd) for tests: EtcdServer, a single
// member, and EtcdCluster, several members on loopback with one
// --initial-cluster. Free ports, a temp data dir, plain HTTP or TLS with
// client certificates on the client URL, started and waited for through
// /health, killed with SIGKILL at the end. Transaction limits are raised
// (see kFlags in etcd_server.cc) as a production etcd for zshard needs them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/http_request.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certs.h"

namespace zshard::testing {

struct EtcdServerOptions {
  // Added to every member's command line.
  std::vector<std::string> extra_flags;
  // The address every member listens on (client and peer URLs), e.g. a
  // NetHosts test address that processes in its hosts reach.
  std::string host = "127.0.0.1";
  // Where member i runs, when set (one entry per member): a command prefix
  // (e.g. NetHosts::Command(h)) and the address it listens on there.
  struct Placement {
    std::vector<std::string> command;
    std::string host;
  };
  std::vector<Placement> placements;
  // Start (and Restart) give up when /health has not answered by then.
  int64_t start_timeout_ms = 30000;
  // Set: the client URLs are HTTPS with tls->server_cert, and clients must
  // present a certificate signed by tls->ca_cert (--client-cert-auth).
  std::optional<TlsFiles> tls;
};

// Members m0..m<n-1> of one cluster, each with its client and peer port on
// 127.0.0.1 and its data dir. Not thread-safe; owned by one test or suite.
class EtcdCluster {
 public:
  // Starts `members` (>= 1) members, then waits until each one's GET
  // /health answers {"health":"true"} (a member is healthy once the
  // cluster has a leader). Unavailable with the tail of a member's log
  // when one does not; FailedPrecondition when etcd is not installed.
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      int members, EtcdServerOptions options = {});
  ~EtcdCluster();  // SIGKILL of every member

  int size() const { return static_cast<int>(members_.size()); }
  // "HOST:PORT" of member i's client URL (HOST: its placement's, else
  // options.host).
  std::string endpoint(int i) const;
  // Every member's, in order.
  std::vector<std::string> endpoints() const;
  // SIGKILL of member i (its data dir stays).
  void Kill(int i);
  // Starts member i again on its ports and data dir and waits for its
  // /health (the others must keep a quorum).
  absl::Status Restart(int i);
  // Whether member i's process runs.
  bool Running(int i);
  // Waits until every running member names the same raft leader and it is
  // one of them (POST /v3/maintenance/status): after a kill of the member
  // that led, once the others elected a new one. Unavailable at the
  // deadline, naming what each member said.
  absl::Status WaitForLeader(int64_t timeout_ms);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    int starts = 0;
    std::string log;
    std::unique_ptr<Subprocess> process;
  };
  EtcdCluster() = default;
  // Picks ports and data dirs (attempt `attempt`), spawns every member and
  // waits for each.
  absl::Status Launch(int attempt);
  absl::Status Spawn(int i);
  // The address member i listens on.
  std::string HostOf(int i) const;
  absl::Status WaitHealthy(int i);
  // A request to member i's client URL (TLS as the options say).
  absl::StatusOr<server::HttpRequestOptions> Request(
      int i, const std::string& method, const std::string& path) const;

  EtcdServerOptions options_;
  TempDir dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

// One member. Not thread-safe; owned by one test or suite.
class EtcdServer {
 public:
  // The etcd binary ($ZSHARD_ETCD_BIN, else /usr/bin/etcd); empty when it
  // is not installed (tests then skip, naming deploy/install-deps.sh).
  static std::string Binary();

  // Starts etcd and waits until GET /health answers {"health":"true"}.
  // Unavailable with the tail of etcd's log when it does not.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      EtcdServerOptions options = {});

  // "127.0.0.1:PORT" of the client URL.
  std::string endpoint() const { return cluster_->endpoint(0); }
  // SIGKILL (the data dir stays).
  void Kill() { cluster_->Kill(0); }
  // Starts it again on the same ports and data dir.
  absl::Status Restart() { return cluster_->Restart(0); }

 private:
  explicit EtcdServer(std::unique_ptr<EtcdCluster> cluster)
      : cluster_(std::move(cluster)) {}
  std::unique_ptr<EtcdCluster> cluster_;
};

}  // namespace zshard::testing
