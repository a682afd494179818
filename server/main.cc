// zshard-coordinator: parses flags and the job file, starts the
// coordinator, and serves until SIGTERM or SIGINT. Bad flags or job file:
// exit status 2 with one line on stderr.
#include <signal.h>

#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/job/job_spec.h"
#include "common/logging.h"
#include "server/coordinator.h"
#include "server/service/checkpoint_convert.h"

namespace {

constexpr char kUsage[] =
    "usage: zshard-coordinator --job JOB.json --listen HOST:PORT "
    "--state-dir DIR [--metrics-listen HOST:PORT] [--tls-cert F --tls-key F "
    "[--tls-client-ca F]] [--admin-token-file F] [--log-format text|json] "
    "[--restore CHECKPOINT_DIR]";

int Fail(int code, const std::string& line) {
  std::fprintf(stderr, "zshard-coordinator: %s\n", line.c_str());
  return code;
}

// Reads --name VALUE and --name=VALUE pairs. Returns an error line or "".
std::string ParseFlags(int argc, char** argv,
                       std::map<std::string, std::string>* flags) {
  static const char* const kKnown[] = {
      "job",        "listen",  "state-dir",     "metrics-listen",
      "tls-cert",   "tls-key", "tls-client-ca", "admin-token-file",
      "log-format", "restore"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return kUsage;
    if (arg.rfind("--", 0) != 0) return "unexpected argument '" + arg + "'";
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "flag --" + name + " needs a value";
    }
    bool known = false;
    for (const char* k : kKnown) known = known || name == k;
    if (!known) return "unknown flag --" + name;
    (*flags)[name] = value;
  }
  for (const char* required : {"job", "listen", "state-dir"}) {
    if (flags->count(required) == 0) {
      return absl::StrCat("flag --", required, " is required");
    }
  }
  for (const char* address : {"listen", "metrics-listen"}) {
    auto it = flags->find(address);
    if (it == flags->end()) continue;
    size_t colon = it->second.rfind(':');
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(it->second.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      return absl::StrCat("flag --", address, " must be HOST:PORT, got '",
                          it->second, "'");
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by sigwait below; block them before threads start.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::map<std::string, std::string> flags;
  std::string error = ParseFlags(argc, argv, &flags);
  if (!error.empty()) return Fail(2, error);
  if (flags.count("log-format")) {
    const std::string& f = flags["log-format"];
    if (f != "text" && f != "json") {
      return Fail(2, "flag --log-format must be text or json");
    }
    zshard::SetLogFormat(f == "json" ? zshard::LogFormat::kJson
                                     : zshard::LogFormat::kText);
  }
  auto text = zshard::ReadFile(flags["job"]);
  if (!text.ok()) {
    return Fail(2, absl::StrCat("job file: ", text.status().message()));
  }
  auto spec = zshard::job::ParseJobSpec(*text);
  if (!spec.ok()) {
    return Fail(2, absl::StrCat("job file '", flags["job"],
                                "': ", spec.status().message()));
  }
  zshard::server::CoordinatorOptions options;
  options.listen = flags["listen"];
  options.state_dir = flags["state-dir"];
  options.metrics_listen = flags["metrics-listen"];
  struct FileFlag {
    const char* flag;
    std::string* dest;
  };
  std::string admin_token;
  for (FileFlag f : {FileFlag{"tls-cert", &options.tls_cert_pem},
                     FileFlag{"tls-key", &options.tls_key_pem},
                     FileFlag{"tls-client-ca", &options.tls_client_ca_pem},
                     FileFlag{"admin-token-file", &admin_token}}) {
    if (flags.count(f.flag) == 0) continue;
    auto contents = zshard::ReadFile(flags[f.flag]);
    if (!contents.ok()) {
      return Fail(2, absl::StrCat("flag --", f.flag, ": ",
                                  contents.status().message()));
    }
    *f.dest = *std::move(contents);
  }
  options.admin_token = std::string(absl::StripAsciiWhitespace(admin_token));
  if (flags.count("admin-token-file") && options.admin_token.empty()) {
    return Fail(2, "flag --admin-token-file: the file is empty");
  }
  if (flags.count("restore")) {
    // The job starts from this checkpoint (a fresh state dir only: the
    // membership refuses a state dir that holds a job).
    auto restore =
        zshard::server::LoadRestoreCheckpoint(flags["restore"], *spec);
    if (!restore.ok()) {
      return Fail(2,
                  absl::StrCat("flag --restore: ", restore.status().message()));
    }
    options.membership.restore = *std::move(restore);
  }
  zshard::SetLogContext({{"job", spec->name}});

  auto coordinator =
      zshard::server::Coordinator::Start(*std::move(spec), options);
  if (!coordinator.ok()) {
    const absl::Status& s = coordinator.status();
    bool usage = s.code() == absl::StatusCode::kInvalidArgument ||
                 s.code() == absl::StatusCode::kFailedPrecondition;
    return Fail(usage ? 2 : 1, std::string(s.message()));
  }
  std::string line =
      absl::StrCat("coordinator listening on ", (*coordinator)->address());
  std::printf("%s\n", line.c_str());
  if ((*coordinator)->metrics_port() > 0) {
    std::printf("metrics listening on port %d\n",
                (*coordinator)->metrics_port());
  }
  std::fflush(stdout);
  ZSHARD_LOG_INFO(line);

  int sig = 0;
  sigwait(&signals, &sig);
  ZSHARD_LOG_INFO(absl::StrCat("signal ", sig, ": shutting down"));
  (*coordinator)->Shutdown();
  return 0;
}
