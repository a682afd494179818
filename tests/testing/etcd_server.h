// A single-member etcd (Debian's /usr/bin/etcd) for tests: free loopback
// ports, a temp data dir, plain HTTP or TLS with client certificates,
// started and waited for through /health, killed with SIGKILL at the end. Its
// transaction limits are raised (see kFlags in etcd_server.cc) as a production
// etcd for zshard needs them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certs.h"

namespace zshard::testing {

struct EtcdServerOptions {
  // Added to etcd's command line.
  std::vector<std::string> extra_flags;
  // Start gives up when /health has not answered by then.
  int64_t start_timeout_ms = 30000;
  // Set: the client URL is HTTPS with tls->server_cert, and clients must
  // present a certificate signed by tls->ca_cert (--client-cert-auth).
  std::optional<TlsFiles> tls;
};

// Not thread-safe; owned by one test or suite.
class EtcdServer {
 public:
  // The etcd binary ($ZSHARD_ETCD_BIN, else /usr/bin/etcd); empty when it
  // is not installed (tests then skip, naming deploy/install-deps.sh).
  static std::string Binary();

  // Starts etcd and waits until GET /health answers {"health":"true"}.
  // Unavailable with the tail of etcd's log when it does not.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      EtcdServerOptions options = {});
  ~EtcdServer();  // SIGKILL

  // "127.0.0.1:PORT" of the client URL.
  std::string endpoint() const;
  // SIGKILL (the data dir stays).
  void Kill();
  // Starts it again on the same ports and data dir.
  absl::Status Restart();

 private:
  EtcdServer() = default;
  absl::Status Launch();

  EtcdServerOptions options_;
  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  int starts_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace zshard::testing
