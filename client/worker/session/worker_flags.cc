// ParseWorkerFlags: a small table-free parser; every error is one line.

#include "client/worker/session/worker_flags.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zshard::worker {

const char* WorkerUsage() {
  return "usage: zshard-worker --coordinator HOST:PORT --name NAME "
         "[--device cpu|cuda] [--labels node=a,zone=b] [--address HOST:PORT] "
         "[--tls-ca F] [--tls-cert F --tls-key F] [--log-format text|json] "
         "[--metrics-listen HOST:PORT] [--dump-master DIR] [--comm-host HOST] "
         "[--comm-transport auto|tcp|shm]";
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
  WorkerFlags flags;
  // Several workers often share a host: one Adam thread each.
  flags.session.train.engine.adam_threads = 1;
  std::optional<std::string> name = env("POD_NAME");
  std::optional<std::string> coordinator = env("ZSHARD_COORDINATOR");
  std::optional<std::string> comm_host;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (flag == "--help" || flag == "-h") {
      flags.help = true;
      return flags;
    }
    if (!absl::StartsWith(flag, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", flag, "'"));
    }
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    static const char* const kKnown[] = {
        "--coordinator",   "--name",           "--device",      "--labels",
        "--address",       "--tls-ca",         "--tls-cert",    "--tls-key",
        "--log-format",    "--metrics-listen", "--dump-master", "--comm-host",
        "--comm-transport"};
    if (std::find(std::begin(kKnown), std::end(kKnown), flag) ==
        std::end(kKnown)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", flag, " needs a value"));
      }
      value = args[++i];
    }
    if (flag == "--coordinator") {
      coordinator = *value;
    } else if (flag == "--name") {
      name = *value;
    } else if (flag == "--device") {
      if (*value != "cpu" && *value != "cuda") {
        return absl::InvalidArgumentError(
            absl::StrCat("--device must be cpu or cuda, not '", *value, "'"));
      }
      flags.session.device = *value;
    } else if (flag == "--labels") {
      auto labels = ParseLabels(*value);
      if (!labels.ok()) return labels.status();
      flags.session.labels = *std::move(labels);
    } else if (flag == "--address") {
      flags.session.address = *value;
    } else if (flag == "--metrics-listen") {
      if (value->find(':') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--metrics-listen must be HOST:PORT, not '", *value, "'"));
      }
      flags.metrics_listen = *value;
    } else if (flag == "--comm-host") {
      if (value->empty()) {
        return absl::InvalidArgumentError("--comm-host must not be empty");
      }
      comm_host = *value;
    } else if (flag == "--comm-transport") {
      absl::StatusOr<comm::HostTransport> t = comm::ParseHostTransport(*value);
      if (!t.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--comm-transport must be auto, tcp or shm, not '", *value, "'"));
      }
      flags.session.train.engine.host_transport = *t;
    } else if (flag == "--dump-master") {
      flags.session.train.dump_master_dir = *value;
    } else if (flag == "--tls-ca") {
      flags.channel.tls_ca_file = *value;
    } else if (flag == "--tls-cert") {
      flags.channel.tls_cert_file = *value;
    } else if (flag == "--tls-key") {
      flags.channel.tls_key_file = *value;
    } else {  // --log-format
      if (*value == "text") {
        flags.log_format = LogFormat::kText;
      } else if (*value == "json") {
        flags.log_format = LogFormat::kJson;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "--log-format must be text or json, not '", *value, "'"));
      }
    }
  }
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
  return flags;
}

}  // namespace zshard::worker
