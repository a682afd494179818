// LocalCoordinator: a free port, a temp state dir, fork/exec, a gRPC probe.

#include "tools/loadgen/local_coordinator.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "nlohmann/json.hpp"

namespace zshard::loadgen {
namespace {

namespace fs = std::filesystem;

// A port of 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::FailedPreconditionError("no socket for a port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  if (port <= 0) return absl::FailedPreconditionError("no free port");
  return port;
}

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

}  // namespace

std::string LocalCoordinator::PresetJob(
    const std::string& preset, const LocalCoordinatorOptions& options) {
  const int i = std::max(1, options.instances);
  const int max_world = (std::max(i, options.max_world) + i - 1) / i * i;
  nlohmann::json job = {
      {"name", "loadgen"},
      {"model", {{"preset", preset}}},
      {"world", {{"instances", i}, {"min", i}, {"max", max_world}}},
      {"lease_timeout_ms", options.lease_ms},
      {"heartbeat_interval_ms", options.heartbeat_ms},
      {"workload", {{"kind", "synthetic"}}}};
  return job.dump();
}

absl::StatusOr<std::unique_ptr<LocalCoordinator>> LocalCoordinator::Start(
    const LocalCoordinatorOptions& options) {
  if (options.job.empty()) {
    return absl::InvalidArgumentError("no job file or preset");
  }
  const std::string binary = options.binary.empty()
                                 ? SelfDir() + "/zshard-coordinator"
                                 : options.binary;
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no coordinator binary at ", binary));
  }
  std::string tmpl = (fs::temp_directory_path() / "zshard-loadgen-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::FailedPreconditionError("cannot make a temp dir");
  }
  std::unique_ptr<LocalCoordinator> c(new LocalCoordinator());
  c->dir_ = tmpl;
  std::string job_path = options.job;
  std::error_code ec;
  if (!fs::is_regular_file(job_path, ec)) {
    job_path = c->dir_ + "/job.json";
    std::ofstream(job_path) << PresetJob(options.job, options);
  }
  auto port = FreePort();
  if (!port.ok()) return port.status();
  auto metrics_port = FreePort();
  if (!metrics_port.ok()) return metrics_port.status();
  c->address_ = absl::StrCat("127.0.0.1:", *port);
  c->metrics_port_ = *metrics_port;
  std::vector<std::string> args = {
      binary,
      "--job",
      job_path,
      "--listen",
      c->address_,
      "--http-listen",
      absl::StrCat("127.0.0.1:", c->metrics_port_)};
  if (options.store.empty()) {
    args.insert(args.end(), {"--state-dir", c->dir_ + "/state"});
  } else {
    args.insert(args.end(), {"--store", options.store});
  }
  const std::string log = c->dir_ + "/coordinator.log";
  pid_t pid = fork();
  if (pid < 0) return absl::FailedPreconditionError("fork failed");
  if (pid == 0) {
    FILE* out = freopen(log.c_str(), "w", stdout);
    if (out != nullptr) dup2(fileno(stdout), STDERR_FILENO);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  c->pid_ = pid;
  auto channel =
      grpc::CreateChannel(c->address_, grpc::InsecureChannelCredentials());
  const auto give_up = std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options.start_timeout_ms);
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      c->pid_ = 0;
      c->dir_.clear();  // kept: it holds the log
      return absl::FailedPreconditionError(
          absl::StrCat("the coordinator exited at start; its log is ", log));
    }
    auto step =
        std::chrono::system_clock::now() + std::chrono::milliseconds(200);
    if (channel->WaitForConnected(step)) break;
    if (std::chrono::system_clock::now() > give_up) {
      c->dir_.clear();  // kept: it holds the log
      return absl::FailedPreconditionError(
          absl::StrCat("the coordinator did not answer in ",
                       options.start_timeout_ms, " ms; its log is ", log));
    }
  }
  return c;
}

absl::StatusOr<StoreWrites> LocalCoordinator::ReadStoreWrites() const {
  httplib::Client http("127.0.0.1", metrics_port_);
  http.set_connection_timeout(5);
  http.set_read_timeout(10);
  auto res = http.Get("/metrics");
  if (!res || res->status != 200) {
    return absl::UnavailableError(absl::StrCat(
        "the coordinator's metrics on port ", metrics_port_, " do not answer"));
  }
  StoreWrites w;
  bool changes = false;
  bool transactions = false;
  for (absl::string_view line : absl::StrSplit(res->body, '\n')) {
    if (absl::ConsumePrefix(&line, "zshard_store_changes_total ")) {
      changes = absl::SimpleAtoi(line, &w.changes);
    } else if (absl::ConsumePrefix(&line, "zshard_store_transactions_total ")) {
      transactions = absl::SimpleAtoi(line, &w.transactions);
    }
  }
  if (!changes || !transactions) {
    return absl::InternalError(
        "the coordinator's metrics have no zshard_store_changes_total or "
        "zshard_store_transactions_total");
  }
  return w;
}

LocalCoordinator::~LocalCoordinator() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

}  // namespace zshard::loadgen
