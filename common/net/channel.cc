// MakeCoordinatorChannel: credentials from PEM files and channel arguments.

#include "common/net/channel.h"

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace zshard::net {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  auto contents = ReadFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file '", path, "' cannot be read"));
  }
  return contents;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCoordinatorChannel(
    const ChannelOptions& options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("coordinator address is empty");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls client certificate and key must be given together");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls_ca_file.empty() && options.tls_cert_file.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      ZSHARD_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                              ReadPem(options.tls_ca_file, "tls ca"));
    }
    if (!options.tls_cert_file.empty()) {
      ZSHARD_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                              ReadPem(options.tls_cert_file, "tls cert"));
      ZSHARD_ASSIGN_OR_RETURN(ssl.pem_private_key,
                              ReadPem(options.tls_key_file, "tls key"));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  // Retry connecting soon after the coordinator comes back. (The "min
  // reconnect backoff" argument is really the connect timeout: leave it at
  // its default, or slow handshakes on a loaded machine are cut short.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Each channel gets its own connection (the load generator opens several
  // to spread its simulated workers, as separate processes would).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              options.max_reconnect_backoff_ms);
  // A connection that a network fault broke silently (packets dropped, no
  // reset) is found by a ping unanswered for a second and made again; left
  // alone, TCP's retransmission back-off would keep it quiet for seconds
  // after the network heals, long enough to lose a lease.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, options.keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(options.target, credentials, args);
}

}  // namespace zshard::net
