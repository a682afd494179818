// zshard-coordinator: parses flags and the job file, starts the
// coordinator, and serves until SIGTERM or SIGINT. Bad flags or job file:
// exit status 2 with one line on stderr.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/torch_convert.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/flags.h"
#include "common/job/job_spec.h"
#include "common/logging.h"
#include "common/mutex_mode.h"
#include "common/status.h"
#include "server/coordinator.h"
#include "server/service/checkpoint_convert.h"
#include "server/store/store_spec.h"

ABSL_FLAG(std::string, job, "", "the job spec (JSON); required");
ABSL_FLAG(std::string, listen, "", "HOST:PORT of the gRPC services; required");
ABSL_FLAG(std::string, advertise, "",
          "HOST:PORT clients reach this coordinator at, as the etcd election "
          "names the leader; default: the --listen host with the bound port "
          "(the hostname for 0.0.0.0 or [::])");
ABSL_FLAG(std::string, store, "",
          "the state store: sqlite:DIR or etcd:HOST:PORT[,HOST:PORT...]/PREFIX;"
          " this or --state-dir is required. With etcd several coordinators "
          "may share PREFIX: one leads, the others stand by (answer "
          "UNAVAILABLE naming the leader) and take over when it goes");
ABSL_FLAG(std::string, state_dir, "",
          "directory of the SQLite state store (--store sqlite:DIR)");
ABSL_FLAG(std::string, etcd_ca, "",
          "PEM CA that etcd's certificate must chain to (HTTPS to etcd)");
ABSL_FLAG(std::string, etcd_cert, "",
          "PEM client certificate for etcd (with --etcd-key)");
ABSL_FLAG(std::string, etcd_key, "", "PEM private key of --etcd-cert");
ABSL_FLAG(int, etcd_lease_ttl, 5,
          "seconds of the etcd election lease: how long a standby waits "
          "to lead after the leader was killed");
ABSL_FLAG(std::string, http_listen, "",
          "HOST:PORT of the HTTP port: the dashboard at /, /metrics, /healthz "
          "and /leader; empty: none");
ABSL_FLAG(std::string, metrics_listen, "",
          "the old name of --http-listen (still accepted)");
ABSL_FLAG(std::string, http_advertise, "",
          "HOST:PORT the HTTP port is reached at, as a standby names the "
          "leader's dashboard; default: the --http-listen host with the "
          "bound port (the hostname for 0.0.0.0 or [::])");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of the server");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of the server");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA that client certificates must chain to (mutual TLS)");
ABSL_FLAG(std::string, admin_token_file, "",
          "file holding the bearer token of AdminService calls");
ABSL_FLAG(std::string, log_format, "text", "text or json");
ABSL_FLAG(std::string, restore, "",
          "checkpoint directory the job starts from (fresh state dir only)");
ABSL_FLAG(std::string, init_from, "",
          "torch.save file ({\"model\": state_dict, \"optimizer\": AdamW "
          "state_dict}, or a state_dict) the job starts from (fresh state "
          "dir only)");

namespace {

constexpr char kUsage[] =
    "usage: zshard-coordinator --job JOB.json --listen HOST:PORT "
    "[--advertise HOST:PORT] (--store sqlite:DIR|etcd:HOST:PORT[,...]/PREFIX "
    "[--etcd-ca F "
    "[--etcd-cert F --etcd-key F]] [--etcd-lease-ttl S] | --state-dir DIR) "
    "[--http-listen HOST:PORT [--http-advertise HOST:PORT]] "
    "[--tls-cert F --tls-key F "
    "[--tls-client-ca F]] [--admin-token-file F] [--log-format text|json] "
    "[--restore CHECKPOINT_DIR | --init-from TORCH_FILE]";

// --init-from: the torch file as a checkpoint (one rank file and its
// manifest) in the state dir, or else the job's checkpoint dir, which the
// job then restores from.
absl::StatusOr<zshard::server::CheckpointRecord> ImportInitCheckpoint(
    const std::string& torch_path, const zshard::job::JobSpec& spec,
    const std::string& state_dir) {
  if (!zshard::job::HasModel(spec)) {
    return absl::InvalidArgumentError(
        "the job has no model to read the file against: write the model in "
        "the job (python -m zshard.spec)");
  }
  if (spec.parallel.model_parallel()) {
    return absl::InvalidArgumentError(
        "the job is model-parallel: a torch file cannot initialize it (each "
        "slot is its own param space); restore a zshard checkpoint of the "
        "same tensor and pipeline sizes instead");
  }
  const std::string root = !state_dir.empty() ? state_dir : spec.checkpoint.dir;
  if (root.empty()) {
    return absl::InvalidArgumentError(
        "the imported checkpoint needs a directory: give --state-dir or set "
        "checkpoint.dir in the job");
  }
  zshard::checkpoint::ImportOptions o;
  o.job = spec.name;
  o.expert_parallel = spec.layout.expert_parallel;
  o.committed_ms = zshard::RealClock::Get()->NowMs();
  ZSHARD_ASSIGN_OR_RETURN(
      zshard::checkpoint::ImportSummary imported,
      zshard::checkpoint::ImportTorchCheckpoint(torch_path, spec.model,
                                                root + "/init-from-torch", o));
  return zshard::server::LoadRestoreCheckpoint(imported.dir, spec);
}

int Fail(int code, const std::string& line) {
  std::fprintf(stderr, "zshard-coordinator: %s\n", line.c_str());
  return code;
}

zshard::FlagList CoordinatorFlags() {
  using zshard::FlagOf;
  return {FlagOf(FLAGS_job),
          FlagOf(FLAGS_listen),
          FlagOf(FLAGS_advertise),
          FlagOf(FLAGS_store),
          FlagOf(FLAGS_state_dir),
          FlagOf(FLAGS_etcd_ca),
          FlagOf(FLAGS_etcd_cert),
          FlagOf(FLAGS_etcd_key),
          FlagOf(FLAGS_etcd_lease_ttl),
          FlagOf(FLAGS_http_listen),
          FlagOf(FLAGS_metrics_listen),
          FlagOf(FLAGS_http_advertise),
          FlagOf(FLAGS_tls_cert),
          FlagOf(FLAGS_tls_key),
          FlagOf(FLAGS_tls_client_ca),
          FlagOf(FLAGS_admin_token_file),
          FlagOf(FLAGS_log_format),
          FlagOf(FLAGS_restore),
          FlagOf(FLAGS_init_from)};
}

// The required flags are given and the addresses are HOST:PORT.
absl::Status CheckFlags(const zshard::ParsedCommandLine& parsed) {
  for (const absl::Flag<std::string>* required : {&FLAGS_job, &FLAGS_listen}) {
    if (!parsed.Given(*required)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", zshard::FlagName(*required), " is required"));
    }
  }
  if (parsed.Given(FLAGS_store) == parsed.Given(FLAGS_state_dir)) {
    return absl::InvalidArgumentError(
        "give one of --store and --state-dir (--state-dir DIR is --store "
        "sqlite:DIR)");
  }
  bool etcd = false;
  if (parsed.Given(FLAGS_store)) {
    auto spec = zshard::server::ParseStoreSpec(absl::GetFlag(FLAGS_store));
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --store: ", spec.status().message()));
    }
    etcd = spec->kind == zshard::server::StoreSpec::Kind::kEtcd;
  }
  for (const absl::Flag<std::string>* tls :
       {&FLAGS_etcd_ca, &FLAGS_etcd_cert, &FLAGS_etcd_key}) {
    if (parsed.Given(*tls) && !etcd) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag ", zshard::FlagName(*tls), " needs --store etcd:..."));
    }
  }
  if (parsed.Given(FLAGS_etcd_lease_ttl) && !etcd) {
    return absl::InvalidArgumentError(
        "flag --etcd-lease-ttl needs --store etcd:...");
  }
  ZSHARD_RETURN_IF_ERROR(zshard::CheckRange(FLAGS_etcd_lease_ttl, 2, 3600));
  if (parsed.Given(FLAGS_etcd_cert) != parsed.Given(FLAGS_etcd_key)) {
    return absl::InvalidArgumentError(
        "flags --etcd-cert and --etcd-key go together");
  }
  if (parsed.Given(FLAGS_http_listen) && parsed.Given(FLAGS_metrics_listen)) {
    return absl::InvalidArgumentError(
        "give one of --http-listen and --metrics-listen (its old name)");
  }
  if (parsed.Given(FLAGS_http_advertise) && !parsed.Given(FLAGS_http_listen) &&
      !parsed.Given(FLAGS_metrics_listen)) {
    return absl::InvalidArgumentError(
        "flag --http-advertise needs --http-listen");
  }
  for (const absl::Flag<std::string>* address :
       {&FLAGS_listen, &FLAGS_advertise, &FLAGS_http_listen,
        &FLAGS_metrics_listen, &FLAGS_http_advertise}) {
    if (!parsed.Given(*address)) continue;
    const std::string value = absl::GetFlag(*address);
    size_t colon = value.rfind(':');
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", zshard::FlagName(*address),
                       " must be HOST:PORT, got '", value, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  zshard::SetBinaryMutexMode();
  // Signals are taken by sigwait below; block them before threads start.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const zshard::FlagList flag_list = CoordinatorFlags();
  auto parsed = zshard::ParseCommandLine(zshard::Args(argc, argv), flag_list);
  if (!parsed.ok()) return Fail(2, std::string(parsed.status().message()));
  if (parsed->help()) {
    std::printf("%s\n\n%s", kUsage, zshard::FlagsHelp(flag_list).c_str());
    return 0;
  }
  if (absl::Status s = CheckFlags(*parsed); !s.ok()) {
    return Fail(2, std::string(s.message()));
  }
  {
    const std::string f = absl::GetFlag(FLAGS_log_format);
    if (f != "text" && f != "json") {
      return Fail(2, "flag --log-format must be text or json");
    }
    zshard::SetLogFormat(f == "json" ? zshard::LogFormat::kJson
                                     : zshard::LogFormat::kText);
  }
  const std::string job_file = absl::GetFlag(FLAGS_job);
  auto text = zshard::ReadFile(job_file);
  if (!text.ok()) {
    return Fail(2, absl::StrCat("job file: ", text.status().message()));
  }
  auto spec = zshard::job::ParseJobSpec(*text);
  if (!spec.ok()) {
    return Fail(2, absl::StrCat("job file '", job_file,
                                "': ", spec.status().message()));
  }
  zshard::server::CoordinatorOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.advertise = absl::GetFlag(FLAGS_advertise);
  options.store = absl::GetFlag(FLAGS_store);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.etcd_tls.ca_file = absl::GetFlag(FLAGS_etcd_ca);
  options.etcd_tls.cert_file = absl::GetFlag(FLAGS_etcd_cert);
  options.etcd_tls.key_file = absl::GetFlag(FLAGS_etcd_key);
  options.etcd_lease_ttl_s = absl::GetFlag(FLAGS_etcd_lease_ttl);
  options.http_listen = parsed->Given(FLAGS_metrics_listen)
                            ? absl::GetFlag(FLAGS_metrics_listen)
                            : absl::GetFlag(FLAGS_http_listen);
  options.http_advertise = absl::GetFlag(FLAGS_http_advertise);
  struct FileFlag {
    const absl::Flag<std::string>* flag;
    std::string* dest;
  };
  std::string admin_token;
  for (FileFlag f : {FileFlag{&FLAGS_tls_cert, &options.tls_cert_pem},
                     FileFlag{&FLAGS_tls_key, &options.tls_key_pem},
                     FileFlag{&FLAGS_tls_client_ca, &options.tls_client_ca_pem},
                     FileFlag{&FLAGS_admin_token_file, &admin_token}}) {
    if (!parsed->Given(*f.flag)) continue;
    auto contents = zshard::ReadFile(absl::GetFlag(*f.flag));
    if (!contents.ok()) {
      return Fail(2, absl::StrCat("flag ", zshard::FlagName(*f.flag), ": ",
                                  contents.status().message()));
    }
    *f.dest = *std::move(contents);
  }
  options.admin_token = std::string(absl::StripAsciiWhitespace(admin_token));
  if (parsed->Given(FLAGS_admin_token_file) && options.admin_token.empty()) {
    return Fail(2, "flag --admin-token-file: the file is empty");
  }
  if (parsed->Given(FLAGS_restore)) {
    // The job starts from this checkpoint (a fresh state dir only: the
    // membership refuses a state dir that holds a job).
    auto restore = zshard::server::LoadRestoreCheckpoint(
        absl::GetFlag(FLAGS_restore), *spec);
    if (!restore.ok()) {
      return Fail(2,
                  absl::StrCat("flag --restore: ", restore.status().message()));
    }
    options.membership.restore = *std::move(restore);
  }
  if (parsed->Given(FLAGS_init_from)) {
    if (parsed->Given(FLAGS_restore)) {
      return Fail(2, "flags --restore and --init-from exclude each other");
    }
    auto restore = ImportInitCheckpoint(absl::GetFlag(FLAGS_init_from), *spec,
                                        options.state_dir);
    if (!restore.ok()) {
      return Fail(
          2, absl::StrCat("flag --init-from: ", restore.status().message()));
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
  if ((*coordinator)->http_port() > 0) {
    // zshard-run reads the port from this line (python/zshard/run.py).
    std::printf("metrics listening on port %d\n", (*coordinator)->http_port());
    std::printf("dashboard at http://%s/\n",
                (*coordinator)->http_advertise().c_str());
  }
  std::fflush(stdout);
  ZSHARD_LOG_INFO(line);

  // Serves until a signal. With etcd it leads or stands by as its election
  // says (Coordinator); it exits 1 only when it came to lead and cannot
  // serve (its lease then ends and another coordinator leads).
  const timespec poll = {0, 200 * 1000 * 1000};
  while (true) {
    const int sig = sigtimedwait(&signals, nullptr, &poll);
    if (sig > 0) {
      ZSHARD_LOG_INFO(absl::StrCat("signal ", sig, ": shutting down"));
      (*coordinator)->Shutdown();
      return 0;
    }
    if (absl::Status failed = (*coordinator)->failure(); !failed.ok()) {
      (*coordinator)->Shutdown();
      return Fail(1, std::string(failed.message()));
    }
  }
}
