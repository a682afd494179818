// AdminService adapter.
#include "server/service/admin_service.h"

#include "common/grpc_status.h"
#include "server/membership/members/token.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {

absl::Status AdminServiceImpl::Authorize(grpc::ServerContext* ctx) const {
  if (admin_token_.empty()) return absl::OkStatus();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return absl::UnauthenticatedError("authorization metadata is missing");
  }
  std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (value.compare(0, prefix.size(), prefix) != 0 ||
      !TokensEqual(value.substr(prefix.size()), admin_token_)) {
    return absl::UnauthenticatedError("admin token is invalid");
  }
  return absl::OkStatus();
}

grpc::Status AdminServiceImpl::DrainWorker(grpc::ServerContext* ctx,
                                           const v1::DrainWorkerRequest* req,
                                           v1::DrainWorkerResponse*) {
  RpcScope scope(metrics_, "DrainWorker");
  absl::Status s = Authorize(ctx);
  if (s.ok() && req->name().empty()) {
    s = absl::InvalidArgumentError("name is missing");
  }
  if (s.ok()) s = membership_->Drain(req->name());
  return scope.Finish(ToGrpcStatus(s));
}

grpc::Status AdminServiceImpl::SetTargetWorld(
    grpc::ServerContext* ctx, const v1::SetTargetWorldRequest* req,
    v1::SetTargetWorldResponse* resp) {
  RpcScope scope(metrics_, "SetTargetWorld");
  absl::Status s = Authorize(ctx);
  if (!s.ok()) return scope.Finish(ToGrpcStatus(s));
  absl::StatusOr<int> w = membership_->SetTargetWorld(req->world());
  if (!w.ok()) return scope.Finish(ToGrpcStatus(w.status()));
  resp->set_target_world(*w);
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
