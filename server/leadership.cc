// The leading coordinator's parts: membership, rendezvous, services, ticker.
#include "server/leadership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/thread_priority.h"
#include "grpcpp/server_builder.h"
#include "server/metrics/reshard_metrics.h"
#include "server/metrics/rpc_metrics.h"
#include "server/metrics/telemetry_metrics.h"
#include "server/service/admin_service.h"
#include "server/service/heartbeat_lane.h"
#include "server/service/rendezvous_service.h"
#include "server/service/worker_service.h"

namespace zshard::server {

absl::StatusOr<std::unique_ptr<Leadership>> Leadership::Start(
    const job::JobSpec& spec, const CoordinatorOptions& options,
    StateStore* store, RpcMetrics* metrics,
    std::function<ElectionView()> election) {
  std::unique_ptr<Leadership> l(new Leadership());
  l->tick_interval_ms_ = options.tick_interval_ms;
  l->rpc_metrics_ = metrics;
  ZSHARD_ASSIGN_OR_RETURN(
      l->membership_,
      Membership::Create(spec, options.clock, store, options.membership));
  ZSHARD_ASSIGN_OR_RETURN(l->kv_,
                          RendezvousKv::Open(options.rendezvous, store));
  l->telemetry_ = std::make_unique<TelemetryStore>(options.telemetry);
  Membership* m = l->membership_.get();
  l->worker_service_ = std::make_unique<WorkerServiceImpl>(
      m, metrics, l->telemetry_.get(), options.clock);
  l->rendezvous_service_ =
      std::make_unique<RendezvousServiceImpl>(m, l->kv_.get(), metrics);
  l->dashboard_service_ =
      std::make_unique<DashboardServiceImpl>(m, l->telemetry_.get(), metrics);
  l->dashboard_service_->set_election(std::move(election));
  l->admin_service_ =
      std::make_unique<AdminServiceImpl>(m, options.admin_token, metrics);
  l->ticker_ = std::thread([raw = l.get()] {
    // Proposals are planned here: below the heartbeat lane.
    LowerThisThreadPriority(kBackgroundNice);
    raw->TickLoop();
  });
  return l;
}

void Leadership::Register(grpc::ServerBuilder* builder) {
  worker_service_->AttachHeartbeats(builder);
  builder->RegisterService(worker_service_.get());
  builder->RegisterService(rendezvous_service_.get());
  builder->RegisterService(dashboard_service_.get());
  builder->RegisterService(admin_service_.get());
}

void Leadership::StartServing() { worker_service_->StartHeartbeats(); }

void Leadership::StopServing() {
  if (worker_service_ != nullptr) worker_service_->StopHeartbeats();
}

void Leadership::TickLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                         absl::Milliseconds(tick_interval_ms_));
    if (stopping_) break;
    mu_.Unlock();
    membership_->Tick();
    mu_.Lock();
  }
}

std::string Leadership::RenderMetrics() {
  MembershipStats s = membership_->Stats();
  std::string out =
      "# HELP zshard_members Members by state.\n"
      "# TYPE zshard_members gauge\n";
  for (MemberState state :
       {MemberState::kJoining, MemberState::kActive, MemberState::kSpare,
        MemberState::kDraining, MemberState::kDead, MemberState::kLeft}) {
    auto it = s.members_by_state.find(state);
    absl::StrAppend(&out, "zshard_members{state=\"", MemberStateName(state),
                    "\"} ", it == s.members_by_state.end() ? 0 : it->second,
                    "\n");
  }
  absl::StrAppend(
      &out, "# HELP zshard_epoch The committed epoch.\n",
      "# TYPE zshard_epoch gauge\n", "zshard_epoch ", s.epoch, "\n",
      "# HELP zshard_transitions_total Epoch transitions by outcome.\n",
      "# TYPE zshard_transitions_total counter\n",
      "zshard_transitions_total{outcome=\"proposed\"} ", s.proposals, "\n",
      "zshard_transitions_total{outcome=\"committed\"} ", s.commits, "\n",
      "zshard_transitions_total{outcome=\"abandoned\"} ", s.abandons, "\n",
      // Abandoned because a later change altered their world (a part of
      // "abandoned").
      "zshard_transitions_total{outcome=\"superseded\"} ", s.superseded, "\n",
      "# HELP zshard_store_changes_total Membership changes written to the "
      "state store.\n",
      "# TYPE zshard_store_changes_total counter\n",
      "zshard_store_changes_total ", s.store_changes, "\n",
      "# HELP zshard_store_transactions_total State store transactions (a "
      "group commit writes many changes in one).\n",
      "# TYPE zshard_store_transactions_total counter\n",
      "zshard_store_transactions_total ", s.store_transactions, "\n",
      "# HELP zshard_store_write_failures_total State store transactions "
      "that failed.\n",
      "# TYPE zshard_store_write_failures_total counter\n",
      "zshard_store_write_failures_total ", s.store_failures, "\n",
      "# HELP zshard_store_write_seconds_total Seconds spent in state store "
      "transactions.\n",
      "# TYPE zshard_store_write_seconds_total counter\n",
      "zshard_store_write_seconds_total ", s.store_seconds, "\n",
      "# HELP zshard_rendezvous_bytes Bytes held by the rendezvous store.\n",
      "# TYPE zshard_rendezvous_bytes gauge\n", "zshard_rendezvous_bytes ",
      kv_->TotalBytes(), "\n");
  absl::StrAppend(&out, RenderReshardMetrics(s, WallTimeMs()));
  absl::StrAppend(&out,
                  RenderTelemetryMetrics(membership_->View(), telemetry_.get()),
                  dashboard_service_->RenderLedgerMetrics());
  return out;
}

void Leadership::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // Start may have failed half way: any part may be missing.
  if (membership_ != nullptr) membership_->Shutdown();
  if (kv_ != nullptr) kv_->Shutdown();
  if (ticker_.joinable()) ticker_.join();
}

Leadership::~Leadership() {
  Stop();
  // The services go before what they point to.
  admin_service_.reset();
  dashboard_service_.reset();
  rendezvous_service_.reset();
  worker_service_.reset();
}

}  // namespace zshard::server
