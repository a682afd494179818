// What a standby coordinator answers (common/net/leader_redirect.h): it
// registers none of the coordinator's services, so every call of the
// worker, rendezvous, admin and dashboard services reaches this generic
// handler, which finishes it with UNAVAILABLE, "standby coordinator: the
// leader is HOST:PORT" (or "... no leader yet") and the leader's address in
// the trailing metadata under kLeaderMetadataKey.
#pragma once

#include <functional>
#include <string>

#include "grpcpp/generic/async_generic_service.h"

namespace zshard::server {

// The message a standby answers with, for `leader` ("" when none is known).
std::string StandbyMessage(const std::string& leader);

// Thread-safe.
class StandbyService final : public grpc::CallbackGenericService {
 public:
  // `leader` returns the leader's advertised address ("" when none is
  // known); it is called once per RPC and must be cheap.
  explicit StandbyService(std::function<std::string()> leader)
      : leader_(std::move(leader)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* ctx) override;

 private:
  const std::function<std::string()> leader_;
};

}  // namespace zshard::server
