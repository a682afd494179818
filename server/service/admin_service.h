// AdminService adapter: drain and target world, behind an optional bearer
// token (`authorization: Bearer <token>` metadata).
#pragma once

#include <string>

#include "server/membership/membership.h"
#include "server/metrics/rpc_metrics.h"
#include "zshard/v1/admin_service.grpc.pb.h"

namespace zshard::server {

// Thread-safe. `admin_token` empty: no token needed. Borrows `membership`
// and `metrics` (may be null).
class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(Membership* membership, std::string admin_token,
                   RpcMetrics* metrics)
      : membership_(membership),
        admin_token_(std::move(admin_token)),
        metrics_(metrics) {}

  grpc::Status DrainWorker(grpc::ServerContext* ctx,
                           const v1::DrainWorkerRequest* req,
                           v1::DrainWorkerResponse* resp) override;
  grpc::Status SetTargetWorld(grpc::ServerContext* ctx,
                              const v1::SetTargetWorldRequest* req,
                              v1::SetTargetWorldResponse* resp) override;

 private:
  // OK when no token is configured or the call carries it; else
  // UNAUTHENTICATED.
  absl::Status Authorize(grpc::ServerContext* ctx) const;

  Membership* membership_;
  const std::string admin_token_;
  RpcMetrics* metrics_;
};

}  // namespace zshard::server
