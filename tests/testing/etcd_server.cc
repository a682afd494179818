// EtcdServer: command line, /health wait, kill.
#include "tests/testing/etcd_server.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/http_request.h"
#include "tests/testing/free_port.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

// Above etcd's defaults (128 ops, 1.5 MiB): a store batch of a large job
// writes every member and a long move list in one transaction.
const char* const kFlags[] = {"--max-txn-ops=16384",
                              "--max-request-bytes=33554432", "--logger=zap",
                              "--log-level=warn"};

}  // namespace

std::string EtcdServer::Binary() {
  const char* env = std::getenv("ZSHARD_ETCD_BIN");
  std::string bin = env != nullptr ? env : "/usr/bin/etcd";
  return access(bin.c_str(), X_OK) == 0 ? bin : "";
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    EtcdServerOptions options) {
  if (Binary().empty()) {
    return absl::FailedPreconditionError(
        "etcd is not installed (deploy/install-deps.sh installs etcd-server)");
  }
  std::unique_ptr<EtcdServer> server(new EtcdServer());
  server->options_ = std::move(options);
  absl::Status last;
  // A free port may be taken between picking and binding: try again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    server->client_port_ = PickFreePort();
    server->peer_port_ = PickFreePort();
    last = server->Launch();
    if (last.ok()) return server;
  }
  return last;
}

EtcdServer::~EtcdServer() { Kill(); }

std::string EtcdServer::endpoint() const {
  return absl::StrCat("127.0.0.1:", client_port_);
}

void EtcdServer::Kill() {
  if (process_ != nullptr) process_->Kill();
}

absl::Status EtcdServer::Restart() {
  Kill();
  return Launch();
}

absl::Status EtcdServer::Launch() {
  const std::string client = absl::StrCat(
      options_.tls.has_value() ? "https://" : "http://", endpoint());
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  Subprocess::Options o;
  o.argv = {Binary(),
            "--name=test",
            "--data-dir=" + dir_.File("data"),
            "--listen-client-urls=" + client,
            "--advertise-client-urls=" + client,
            "--listen-peer-urls=" + peer,
            "--initial-advertise-peer-urls=" + peer,
            "--initial-cluster=test=" + peer};
  for (const char* f : kFlags) o.argv.emplace_back(f);
  server::HttpRequestOptions probe;
  probe.method = "GET";
  probe.host = "127.0.0.1";
  probe.port = client_port_;
  probe.path = "/health";
  probe.connect_timeout_ms = 200;
  probe.request_timeout_ms = 1000;
  if (options_.tls.has_value()) {
    const TlsFiles& t = *options_.tls;
    o.argv.push_back("--cert-file=" + t.server_cert);
    o.argv.push_back("--key-file=" + t.server_key);
    o.argv.push_back("--trusted-ca-file=" + t.ca_cert);
    o.argv.push_back("--client-cert-auth");
    auto tls =
        server::HttpTls::Create({t.ca_cert, t.client_cert, t.client_key});
    if (!tls.ok()) return tls.status();
    probe.tls = *std::move(tls);
  }
  o.argv.insert(o.argv.end(), options_.extra_flags.begin(),
                options_.extra_flags.end());
  const std::string log = dir_.File(absl::StrCat("etcd-", starts_++, ".log"));
  o.stdout_path = log;
  o.stderr_path = log;
  auto child = Subprocess::Start(o);
  if (!child.ok()) return child.status();
  process_ = *std::move(child);
  const bool healthy = WaitFor(
      [&] {
        if (!process_->Running()) return true;  // exited: fail below
        auto res = server::HttpRequest(probe);
        return res.ok() && res->status == 200 &&
               res->body.find("\"true\"") != std::string::npos;
      },
      options_.start_timeout_ms, 50);
  if (!healthy || !process_->Running()) {
    process_->Kill();
    const std::string text = ReadLog(log);
    return absl::UnavailableError(
        absl::StrCat("etcd did not become healthy on ", endpoint(), ": ",
                     text.substr(text.size() > 2000 ? text.size() - 2000 : 0)));
  }
  return absl::OkStatus();
}

}  // namespace zshard::testing
