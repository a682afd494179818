// The standby's answer to every RPC: UNAVAILABLE naming the leader.
#include "server/standby_service.h"

#include "absl/strings/str_cat.h"
#include "common/net/leader_redirect.h"

namespace zshard::server {

std::string StandbyMessage(const LeaderAddresses& leader) {
  if (leader.grpc.empty()) return "standby coordinator: no leader yet";
  return absl::StrCat(
      "standby coordinator: the leader is ", leader.grpc,
      leader.http.empty()
          ? std::string()
          : absl::StrCat(", its dashboard http://", leader.http, "/"));
}

grpc::ServerGenericBidiReactor* StandbyService::CreateReactor(
    grpc::GenericCallbackServerContext* ctx) {
  // Finishes at once without reading the request.
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* ctx,
            const LeaderAddresses& leader) {
      if (!leader.grpc.empty()) {
        ctx->AddTrailingMetadata(net::kLeaderMetadataKey, leader.grpc);
        if (!leader.http.empty()) {
          ctx->AddTrailingMetadata(net::kLeaderHttpMetadataKey, leader.http);
        }
      }
      Finish(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, StandbyMessage(leader)));
    }
    void OnDone() override { delete this; }
  };
  return new Reactor(ctx, leader_());
}

}  // namespace zshard::server
