// What a standby coordinator answers (common/net/leader_redirect.h): it
// registers none of the coordinator's services, so every call of the
// worker, rendezvous, admin and dashboard services reaches this generic
// handler, which finishes it with UNAVAILABLE, "standby coordinator: the
// leader is HOST:PORT" (", its dashboard http://HOST:PORT/" after it when
// the leader has an HTTP port; "... no leader yet" when none is known) and
// the leader's addresses in the trailing metadata (kLeaderMetadataKey,
// kLeaderHttpMetadataKey).
#pragma once

#include <functional>
#include <string>

#include "grpcpp/generic/async_generic_service.h"

namespace zshard::server {

// Where the leader is: its advertised gRPC address and its HTTP port's
// ("" when unknown or none).
struct LeaderAddresses {
  std::string grpc;
  std::string http;
};

// The message a standby answers with ("" grpc: no leader is known).
std::string StandbyMessage(const LeaderAddresses& leader);

// Thread-safe.
class StandbyService final : public grpc::CallbackGenericService {
 public:
  // `leader` returns the leader's advertised addresses; it is called once
  // per RPC and must be cheap.
  explicit StandbyService(std::function<LeaderAddresses()> leader)
      : leader_(std::move(leader)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* ctx) override;

 private:
  const std::function<LeaderAddresses()> leader_;
};

}  // namespace zshard::server
