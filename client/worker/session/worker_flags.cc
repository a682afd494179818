// ParseWorkerFlags: the flags are defined here with Abseil and parsed by
// common/flags; every error is one line.

#include "client/worker/session/worker_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/worker/device/device_spec.h"
#include "common/flags.h"
#include "common/net/coordinator_list.h"
#include "common/status.h"

ABSL_FLAG(std::string, coordinator, "",
          "HOST:PORT of the coordinator, or a comma-separated list of them "
          "(several coordinators: the worker follows the leader; default "
          "$ZSHARD_COORDINATOR)");
ABSL_FLAG(std::string, name, "",
          "this worker's name, unique in the job (default $POD_NAME)");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, cuda or cuda:N: where the step runs (checked at start)");
ABSL_FLAG(std::string, labels, "", "topology labels: node=a,zone=b");
ABSL_FLAG(std::string, address, "",
          "HOST:PORT this worker is reached at, for the coordinator's view");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA of the coordinator's certificate");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM client key for mutual TLS");
ABSL_FLAG(std::string, log_format, "text", "text or json");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT of /healthz and /metrics; empty: none");
ABSL_FLAG(std::string, dump_master, "",
          "directory the fp32 master shards are written to at the end");
ABSL_FLAG(std::string, comm_host, "",
          "host peers reach this worker's collectives at (default $POD_IP, "
          "else the host of --address, else 127.0.0.1)");
ABSL_FLAG(std::string, comm_transport, "auto",
          "host collectives' transport: auto, tcp or shm");
ABSL_FLAG(std::string, trainer_socket, "",
          "Unix socket a trainer process attaches to (jobs of the trainer "
          "workload; default $ZSHARD_TRAINER_SOCKET)");
ABSL_FLAG(int, trainer_store_port, 0,
          "model-parallel trainer jobs: the port of the TCPStore this "
          "worker's trainer hosts for its replica's torch.distributed groups "
          "when it is the replica's rank 0 (0: a free port)");
ABSL_FLAG(int64_t, collective_timeout_ms, 30000,
          "bound on each collective and rendezvous of the step and of state "
          "moves, in ms (100 to 3,600,000)");
ABSL_FLAG(int, fault_prepare_failures, 0,
          "fault injection for tests: the first N epoch preparations fail "
          "and are reported as failures are");

namespace zshard::worker {
namespace {

FlagList WorkerFlagList() {
  return {FlagOf(FLAGS_coordinator),
          FlagOf(FLAGS_name),
          FlagOf(FLAGS_device),
          FlagOf(FLAGS_labels),
          FlagOf(FLAGS_address),
          FlagOf(FLAGS_tls_ca),
          FlagOf(FLAGS_tls_cert),
          FlagOf(FLAGS_tls_key),
          FlagOf(FLAGS_log_format),
          FlagOf(FLAGS_metrics_listen),
          FlagOf(FLAGS_dump_master),
          FlagOf(FLAGS_comm_host),
          FlagOf(FLAGS_comm_transport),
          FlagOf(FLAGS_collective_timeout_ms),
          FlagOf(FLAGS_trainer_socket),
          FlagOf(FLAGS_trainer_store_port),
          FlagOf(FLAGS_fault_prepare_failures)};
}

// The flags' values checked and copied into `flags`; `name`, `coordinator`
// and `comm_host` keep their environment defaults unless given.
absl::Status ReadFlags(const ParsedCommandLine& parsed, WorkerFlags* flags,
                       std::optional<std::string>* name,
                       std::optional<std::string>* coordinator,
                       std::optional<std::string>* comm_host) {
  if (parsed.Given(FLAGS_coordinator)) {
    *coordinator = absl::GetFlag(FLAGS_coordinator);
  }
  if (parsed.Given(FLAGS_name)) *name = absl::GetFlag(FLAGS_name);
  absl::StatusOr<device::DeviceSpec> device =
      device::ParseDeviceSpec(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", device.status().message()));
  }
  flags->session.device = std::string(device::DeviceKindName(device->kind));
  flags->session.train.engine.device = *device;
  if (parsed.Given(FLAGS_labels)) {
    ZSHARD_ASSIGN_OR_RETURN(flags->session.labels,
                            ParseLabels(absl::GetFlag(FLAGS_labels)));
  }
  flags->session.address = absl::GetFlag(FLAGS_address);
  const std::string metrics = absl::GetFlag(FLAGS_metrics_listen);
  if (parsed.Given(FLAGS_metrics_listen) &&
      metrics.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen must be HOST:PORT, not '", metrics, "'"));
  }
  flags->metrics_listen = metrics;
  if (parsed.Given(FLAGS_comm_host)) {
    *comm_host = absl::GetFlag(FLAGS_comm_host);
    if ((*comm_host)->empty()) {
      return absl::InvalidArgumentError("--comm-host must not be empty");
    }
  }
  const std::string transport = absl::GetFlag(FLAGS_comm_transport);
  absl::StatusOr<comm::HostTransport> t = comm::ParseHostTransport(transport);
  if (!t.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--comm-transport must be auto, tcp or shm, not '", transport, "'"));
  }
  if (parsed.Given(FLAGS_comm_transport)) {
    flags->session.train.engine.host_transport = *t;
  }
  flags->session.train.dump_master_dir = absl::GetFlag(FLAGS_dump_master);
  if (parsed.Given(FLAGS_trainer_socket)) {
    flags->session.train.trainer_socket = absl::GetFlag(FLAGS_trainer_socket);
    if (flags->session.train.trainer_socket.empty()) {
      return absl::InvalidArgumentError("--trainer-socket must not be empty");
    }
  }
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_trainer_store_port, 0, 65535));
  flags->session.train.trainer_store_port =
      absl::GetFlag(FLAGS_trainer_store_port);
  ZSHARD_RETURN_IF_ERROR(
      CheckRange(FLAGS_collective_timeout_ms, int64_t{100}, int64_t{3600000}));
  flags->session.train.engine.comm_timeout_ms =
      absl::GetFlag(FLAGS_collective_timeout_ms);
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_fault_prepare_failures, 0, 1000));
  flags->session.train.inject_prepare_failures =
      absl::GetFlag(FLAGS_fault_prepare_failures);
  flags->channel.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  flags->channel.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  flags->channel.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format == "text") {
    flags->log_format = LogFormat::kText;
  } else if (log_format == "json") {
    flags->log_format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-format must be text or json, not '", log_format, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorkerUsage() {
  return absl::StrCat(
      "usage: zshard-worker --coordinator HOST:PORT[,HOST:PORT...] --name NAME "
      "[--device cpu|cuda[:N]] [--labels node=a,zone=b] [--address HOST:PORT] "
      "[--tls-ca F] [--tls-cert F --tls-key F] [--log-format text|json] "
      "[--metrics-listen HOST:PORT] [--dump-master DIR] [--comm-host HOST] "
      "[--comm-transport auto|tcp|shm] [--trainer-socket PATH] "
      "[--trainer-store-port PORT] "
      "[--fault-prepare-failures N]\n\n",
      FlagsHelp(WorkerFlagList()));
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::string& text) {
  std::map<std::string, std::string> labels;
  if (text.empty()) return labels;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (!absl::StrContains(entry, '=') || kv.first.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--labels entry '", entry, "' is not key=value"));
    }
    labels[kv.first] = kv.second;
  }
  return labels;
}

absl::StatusOr<WorkerFlags> ParseWorkerFlags(
    const std::vector<std::string>& args, const EnvLookup& env) {
  ZSHARD_ASSIGN_OR_RETURN(ParsedCommandLine parsed,
                          ParseCommandLine(args, WorkerFlagList()));
  WorkerFlags flags;
  // Several workers often share a host: one Adam thread each.
  flags.session.train.engine.adam_threads = 1;
  if (parsed.help()) {
    flags.help = true;
    return flags;
  }
  std::optional<std::string> name = env("POD_NAME");
  std::optional<std::string> coordinator = env("ZSHARD_COORDINATOR");
  std::optional<std::string> comm_host;
  ZSHARD_RETURN_IF_ERROR(
      ReadFlags(parsed, &flags, &name, &coordinator, &comm_host));
  if (!name.has_value() || name->empty()) {
    return absl::InvalidArgumentError("--name is required (or set POD_NAME)");
  }
  if (name->size() > 256) {
    return absl::InvalidArgumentError("--name is longer than 256 characters");
  }
  if (!coordinator.has_value() || coordinator->empty()) {
    return absl::InvalidArgumentError(
        "--coordinator is required (or set ZSHARD_COORDINATOR)");
  }
  if (flags.channel.tls_cert_file.empty() !=
      flags.channel.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  ZSHARD_RETURN_IF_ERROR(net::ParseCoordinatorList(*coordinator).status());
  flags.session.name = *name;
  flags.channel.target = *coordinator;
  // Where peers reach this worker's collectives and state moves: the flag,
  // else the pod's IP, else the host of --address, else loopback.
  if (!comm_host.has_value()) comm_host = env("POD_IP");
  if ((!comm_host.has_value() || comm_host->empty()) &&
      !flags.session.address.empty()) {
    const std::string& address = flags.session.address;
    const size_t colon = address.rfind(':');
    std::string host =
        colon == std::string::npos ? address : address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (!host.empty()) comm_host = host;
  }
  if (comm_host.has_value() && !comm_host->empty()) {
    flags.session.train.engine.hostname = *comm_host;
  }
  if (flags.session.train.trainer_socket.empty()) {
    flags.session.train.trainer_socket =
        env("ZSHARD_TRAINER_SOCKET").value_or("");
  }
  return flags;
}

}  // namespace zshard::worker
