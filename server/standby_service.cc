// The standby's answer to every RPC: UNAVAILABLE naming the leader.
#include "server/standby_service.h"

#include "absl/strings/str_cat.h"
#include "common/net/leader_redirect.h"

namespace zshard::server {

std::string StandbyMessage(const std::string& leader) {
  return leader.empty()
             ? std::string("standby coordinator: no leader yet")
             : absl::StrCat("standby coordinator: the leader is ", leader);
}

grpc::ServerGenericBidiReactor* StandbyService::CreateReactor(
    grpc::GenericCallbackServerContext* ctx) {
  // Finishes at once without reading the request.
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(grpc::GenericCallbackServerContext* ctx,
            const std::string& leader) {
      if (!leader.empty()) {
        ctx->AddTrailingMetadata(net::kLeaderMetadataKey, leader);
      }
      Finish(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, StandbyMessage(leader)));
    }
    void OnDone() override { delete this; }
  };
  return new Reactor(ctx, leader_());
}

}  // namespace zshard::server
