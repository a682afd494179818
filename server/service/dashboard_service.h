// DashboardService adapter (read-only): cluster status, plan, events,
// telemetry, the measured ledger and explanations.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/plan/ledger.h"
#include "server/membership/membership.h"
#include "server/metrics/rpc_metrics.h"
#include "server/service/event_watch.h"
#include "server/telemetry/telemetry_store.h"
#include "server/views/plan_cache.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::server {

// Who leads the coordinator's store and who stands by (advertised
// addresses), for GetClusterStatus.
struct ElectionView {
  std::string leader;
  std::string leader_http;  // the leader's HTTP port ("" when none)
  std::vector<std::string> standbys;
};

// Thread-safe. Borrows `membership`, `telemetry` and `metrics` (may be
// null); all outlive the service. Destroy after the gRPC server shut down.
class DashboardServiceImpl final
    : public v1::DashboardService::WithCallbackMethod_WatchEvents<
          v1::DashboardService::Service> {
 public:
  DashboardServiceImpl(Membership* membership, TelemetryStore* telemetry,
                       RpcMetrics* metrics)
      : membership_(membership),
        telemetry_(telemetry),
        metrics_(metrics),
        plans_(&membership->spec()),
        watch_hub_(membership->events(), [this] { WarmPlan(); }) {}

  grpc::Status GetClusterStatus(grpc::ServerContext* ctx,
                                const v1::GetClusterStatusRequest* req,
                                v1::GetClusterStatusResponse* resp) override;
  // The committed epoch's plan: buffers, and per rank the owned elements
  // (a model-parallel job's: per slot, GetPlanRequest.slot).
  // INVALID_ARGUMENT for a rank outside the world or a slot outside the
  // job's; FAILED_PRECONDITION before the first epoch.
  grpc::Status GetPlan(grpc::ServerContext* ctx, const v1::GetPlanRequest* req,
                       v1::GetPlanResponse* resp) override;
  // A page of the event log, oldest first.
  grpc::Status ListEvents(grpc::ServerContext* ctx,
                          const v1::ListEventsRequest* req,
                          v1::ListEventsResponse* resp) override;
  // Follows the event log (callback API: open follows hold no thread).
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(
      grpc::CallbackServerContext* ctx,
      const v1::WatchEventsRequest* req) override;
  // Live workers' telemetry; INVALID_ARGUMENT for a negative sample count.
  grpc::Status GetTelemetry(grpc::ServerContext* ctx,
                            const v1::GetTelemetryRequest* req,
                            v1::GetTelemetryResponse* resp) override;
  // Predicted vs measured memory per rank of the committed epoch (a
  // model-parallel job's: each rank's slot plan's); FAILED_PRECONDITION
  // before the first epoch.
  grpc::Status GetLedger(grpc::ServerContext* ctx,
                         const v1::GetLedgerRequest* req,
                         v1::GetLedgerResponse* resp) override;
  grpc::Status Explain(grpc::ServerContext* ctx, const v1::ExplainRequest* req,
                       v1::ExplainResponse* resp) override;
  // Committed checkpoints, oldest first, without their files.
  grpc::Status ListCheckpoints(grpc::ServerContext* ctx,
                               const v1::ListCheckpointsRequest* req,
                               v1::ListCheckpointsResponse* resp) override;
  // The latest transitions, oldest first; INVALID_ARGUMENT for a negative
  // limit.
  grpc::Status GetReshardHistory(grpc::ServerContext* ctx,
                                 const v1::GetReshardHistoryRequest* req,
                                 v1::GetReshardHistoryResponse* resp) override;

  // Fills GetClusterStatus's leader and standbys (unset: left empty). Call
  // before serving.
  void set_election(std::function<ElectionView()> election) {
    election_ = std::move(election);
  }

  // Prometheus text of zshard_rank_memory_predicted_bytes{rank, worker,
  // category} for the committed epoch (no samples before the first).
  std::string RenderLedgerMetrics();

 private:
  // Builds the committed epoch's plan index ahead of the first query (on
  // the event notifier thread, after each event).
  void WarmPlan();
  // The ledger of the committed epoch (GetLedger's body); a model-parallel
  // job's per slot.
  absl::Status Ledger(v1::GetLedgerResponse* resp);
  // Adds `rank`'s row: `predicted` next to its latest telemetry.
  v1::RankLedger* AddRankLedger(const EpochPlan& committed, int rank,
                                const plan::StageBytes& predicted,
                                v1::GetLedgerResponse* resp);
  // GetPlan's body (dashboard_plan.cc).
  absl::Status Plan(const v1::GetPlanRequest& req, v1::GetPlanResponse* resp);
  // GetPlan's answer from one plan: the job's, or a slot's.
  absl::Status FillPlan(const CachedPlan& cached, const v1::GetPlanRequest& req,
                        v1::GetPlanResponse* resp);
  // GetPlan's moves: those into cached.ranks, with names and sources.
  void FillMoves(const CachedPlan& cached, v1::GetPlanResponse* resp);

  Membership* membership_;
  TelemetryStore* telemetry_;
  RpcMetrics* metrics_;
  std::function<ElectionView()> election_;
  PlanCache plans_;
  EventWatchHub watch_hub_;
};

}  // namespace zshard::server
