// The gRPC channel to the coordinator, plain or TLS (optionally with a
// client certificate for mutual TLS), with reconnect backoff short enough
// that workers re-attach within a second of the coordinator coming back.
// Shared by the worker, zshardctl and the load generator.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace zshard::net {

struct ChannelOptions {
  // HOST:PORT of the coordinator. Required.
  std::string target;
  // PEM file of the CA that signed the coordinator's certificate. Empty
  // (default) with no client certificate: plaintext.
  std::string tls_ca_file;
  // PEM certificate chain and key of this client, for mutual TLS. Both or
  // neither; setting them turns TLS on.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Upper bound of gRPC's reconnect backoff. Default 1000 ms.
  int max_reconnect_backoff_ms = 1000;
  // A ping after this long without hearing from the coordinator, and the
  // connection dropped and made again when it is unanswered as long.
  int keepalive_ms = 1000;
};

// Creates the channel (connects lazily). InvalidArgument for an empty
// target, a certificate without a key (or the reverse) or an unreadable
// PEM file.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCoordinatorChannel(
    const ChannelOptions& options);

}  // namespace zshard::net
