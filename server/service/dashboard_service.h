// DashboardService adapter (read-only): cluster status and plan summary.
#pragma once

#include "server/membership/membership.h"
#include "server/metrics/rpc_metrics.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server {

// Thread-safe. Borrows `membership` and `metrics` (may be null).
class DashboardServiceImpl final : public v1::DashboardService::Service {
 public:
  DashboardServiceImpl(Membership* membership, RpcMetrics* metrics)
      : membership_(membership), metrics_(metrics) {}

  grpc::Status GetClusterStatus(grpc::ServerContext* ctx,
                                const v1::GetClusterStatusRequest* req,
                                v1::GetClusterStatusResponse* resp) override;
  // The committed epoch's plan: buffers, and per rank the owned elements.
  // INVALID_ARGUMENT for a rank outside the world; FAILED_PRECONDITION
  // before the first epoch.
  grpc::Status GetPlan(grpc::ServerContext* ctx, const v1::GetPlanRequest* req,
                       v1::GetPlanResponse* resp) override;

 private:
  Membership* membership_;
  RpcMetrics* metrics_;
};

}  // namespace zshard::server
