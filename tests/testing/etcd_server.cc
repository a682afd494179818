// EtcdCluster and EtcdServer: command lines, /health waits, kills.
#include "tests/testing/etcd_server.h"

#include <unistd.h>

#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
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
  auto cluster = EtcdCluster::Start(1, std::move(options));
  if (!cluster.ok()) return cluster.status();
  return std::unique_ptr<EtcdServer>(new EtcdServer(*std::move(cluster)));
}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(
    int members, EtcdServerOptions options) {
  if (EtcdServer::Binary().empty()) {
    return absl::FailedPreconditionError(
        "etcd is not installed (deploy/install-deps.sh installs etcd-server)");
  }
  if (members < 1) {
    return absl::InvalidArgumentError("an etcd cluster needs a member");
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  cluster->options_ = std::move(options);
  cluster->members_.resize(static_cast<size_t>(members));
  absl::Status last;
  // A free port may be taken between picking and binding: try again, with
  // fresh ports and data dirs.
  for (int attempt = 0; attempt < 3; ++attempt) {
    last = cluster->Launch(attempt);
    if (last.ok()) return cluster;
    for (int i = 0; i < members; ++i) cluster->Kill(i);
  }
  return last;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill(i);
}

std::string EtcdCluster::HostOf(int i) const {
  const size_t k = static_cast<size_t>(i);
  return k < options_.placements.size() && !options_.placements[k].host.empty()
             ? options_.placements[k].host
             : options_.host;
}

std::string EtcdCluster::endpoint(int i) const {
  return absl::StrCat(HostOf(i), ":",
                      members_[static_cast<size_t>(i)].client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  if (m.process != nullptr) m.process->Kill();
}

bool EtcdCluster::Running(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  return m.process != nullptr && m.process->Running();
}

absl::Status EtcdCluster::Restart(int i) {
  Kill(i);
  absl::Status spawned = Spawn(i);
  if (!spawned.ok()) return spawned;
  return WaitHealthy(i);
}

absl::Status EtcdCluster::Launch(int attempt) {
  std::vector<std::string> peers;
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    m.name = members_.size() == 1 ? "test" : absl::StrCat("m", i);
    m.client_port = PickFreePort();
    m.peer_port = PickFreePort();
    m.data_dir = dir_.File(absl::StrCat("data-", attempt, "-", i));
    peers.push_back(
        absl::StrCat(m.name, "=",
                     absl::StrCat("http://", HostOf(static_cast<int>(i)), ":",
                                  m.peer_port)));
  }
  initial_cluster_ = absl::StrJoin(peers, ",");
  // Every member first: one alone has no quorum and is never healthy.
  for (int i = 0; i < size(); ++i) {
    absl::Status s = Spawn(i);
    if (!s.ok()) return s;
  }
  for (int i = 0; i < size(); ++i) {
    absl::Status s = WaitHealthy(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Spawn(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  const std::string client = absl::StrCat(
      options_.tls.has_value() ? "https://" : "http://", endpoint(i));
  const std::string peer = absl::StrCat("http://", HostOf(i), ":", m.peer_port);
  Subprocess::Options o;
  if (static_cast<size_t>(i) < options_.placements.size()) {
    o.argv = options_.placements[static_cast<size_t>(i)].command;
  }
  // The --initial-* flags only matter while the data dir is empty.
  for (std::string arg :
       {EtcdServer::Binary(), "--name=" + m.name, "--data-dir=" + m.data_dir,
        "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=" + initial_cluster_,
        std::string("--initial-cluster-state=new"),
        std::string("--initial-cluster-token=zshard-test")}) {
    o.argv.push_back(std::move(arg));
  }
  for (const char* f : kFlags) o.argv.emplace_back(f);
  if (options_.tls.has_value()) {
    const TlsFiles& t = *options_.tls;
    o.argv.push_back("--cert-file=" + t.server_cert);
    o.argv.push_back("--key-file=" + t.server_key);
    o.argv.push_back("--trusted-ca-file=" + t.ca_cert);
    o.argv.push_back("--client-cert-auth");
  }
  o.argv.insert(o.argv.end(), options_.extra_flags.begin(),
                options_.extra_flags.end());
  m.log = dir_.File(absl::StrCat("etcd-", m.name, "-", m.starts++, ".log"));
  o.stdout_path = m.log;
  o.stderr_path = m.log;
  auto child = Subprocess::Start(o);
  if (!child.ok()) return child.status();
  m.process = *std::move(child);
  return absl::OkStatus();
}

absl::StatusOr<server::HttpRequestOptions> EtcdCluster::Request(
    int i, const std::string& method, const std::string& path) const {
  server::HttpRequestOptions r;
  r.method = method;
  r.host = HostOf(i);
  r.port = members_[static_cast<size_t>(i)].client_port;
  r.path = path;
  r.connect_timeout_ms = 200;
  r.request_timeout_ms = 1000;
  if (options_.tls.has_value()) {
    const TlsFiles& t = *options_.tls;
    auto tls =
        server::HttpTls::Create({t.ca_cert, t.client_cert, t.client_key});
    if (!tls.ok()) return tls.status();
    r.tls = *std::move(tls);
  }
  return r;
}

absl::Status EtcdCluster::WaitForLeader(int64_t timeout_ms) {
  std::string said;
  const bool agreed = WaitFor(
      [&] {
        said.clear();
        std::set<std::string> ids, leaders;
        for (int i = 0; i < size(); ++i) {
          if (!Running(i)) continue;
          auto r = Request(i, "POST", "/v3/maintenance/status");
          if (!r.ok()) return false;
          r->body = "{}";
          auto res = server::HttpRequest(*r);
          if (!res.ok() || res->status != 200) return false;
          auto j = nlohmann::json::parse(res->body, nullptr, false);
          if (!j.is_object() || !j.contains("header")) return false;
          const std::string id = j["header"].value("member_id", "");
          const std::string leader = j.value("leader", "");
          absl::StrAppend(&said, members_[static_cast<size_t>(i)].name, " (",
                          id, "): leader ", leader, "; ");
          ids.insert(id);
          leaders.insert(leader);
        }
        return leaders.size() == 1 && ids.count(*leaders.begin()) > 0;
      },
      timeout_ms, 50);
  if (agreed) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("etcd members agree on no live leader: ", said));
}

absl::Status EtcdCluster::WaitHealthy(int i) {
  Member& m = members_[static_cast<size_t>(i)];
  auto probe = Request(i, "GET", "/health");
  if (!probe.ok()) return probe.status();
  const bool healthy = WaitFor(
      [&] {
        if (!m.process->Running()) return true;  // exited: fail below
        auto res = server::HttpRequest(*probe);
        return res.ok() && res->status == 200 &&
               res->body.find("\"true\"") != std::string::npos;
      },
      options_.start_timeout_ms, 50);
  if (!healthy || !m.process->Running()) {
    m.process->Kill();
    const std::string text = ReadLog(m.log);
    return absl::UnavailableError(absl::StrCat(
        "etcd member ", m.name, " did not become healthy on ", endpoint(i),
        ": ", text.substr(text.size() > 2000 ? text.size() - 2000 : 0)));
  }
  return absl::OkStatus();
}

}  // namespace zshard::testing
