// DashboardService adapter: GetTelemetry and GetLedger.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/plan/ledger.h"
#include "common/plan/parallel.h"
#include "common/status.h"
#include "server/metrics/telemetry_metrics.h"
#include "server/service/dashboard_service.h"
#include "server/service/rpc_scope.h"
#include "server/views/measured_ledger.h"

namespace zshard::server {
namespace {

void SampleToProto(const TelemetryPoint& p, v1::TelemetrySample* out) {
  out->set_step(p.step);
  out->set_epoch(p.epoch);
  out->set_time_ms(p.time_ms);
  out->set_step_ms(p.step_ms);
  for (const auto& [name, ms] : p.phases) {
    v1::PhaseTime* t = out->add_phases();
    t->set_phase(name);
    t->set_ms(ms);
  }
  out->set_bytes_sent(p.bytes_sent);
  out->set_bytes_received(p.bytes_received);
  out->set_loss(p.loss);
  out->set_grad_norm(p.grad_norm);
  out->set_skipped(p.skipped);
}

// Fills the response's aggregates from its ranked workers.
void Aggregate(v1::GetTelemetryResponse* resp) {
  int n = 0;
  std::vector<std::string> order;
  std::map<std::string, double> phase_sum;
  std::map<std::string, int> phase_n;
  for (const v1::RankTelemetry& r : resp->ranks()) {
    if (r.rank() < 0) continue;
    const v1::TelemetrySample& l = r.latest();
    if (n == 0 || l.step() < resp->min_step()) resp->set_min_step(l.step());
    if (n == 0 || l.step() > resp->max_step()) resp->set_max_step(l.step());
    ++n;
    resp->set_mean_step_ms(resp->mean_step_ms() + l.step_ms());
    resp->set_max_step_ms(std::max(resp->max_step_ms(), l.step_ms()));
    resp->set_bytes_per_s(resp->bytes_per_s() + r.bytes_per_s());
    resp->set_mean_loss(resp->mean_loss() + l.loss());
    resp->set_mean_grad_norm(resp->mean_grad_norm() + l.grad_norm());
    for (const v1::PhaseTime& t : l.phases()) {
      if (phase_n[t.phase()]++ == 0) order.push_back(t.phase());
      phase_sum[t.phase()] += t.ms();
    }
  }
  if (n == 0) return;
  resp->set_mean_step_ms(resp->mean_step_ms() / n);
  resp->set_mean_loss(resp->mean_loss() / n);
  resp->set_mean_grad_norm(resp->mean_grad_norm() / n);
  for (const std::string& phase : order) {
    v1::PhaseTime* t = resp->add_mean_phases();
    t->set_phase(phase);
    t->set_ms(phase_sum[phase] / phase_n[phase]);
  }
}

}  // namespace

grpc::Status DashboardServiceImpl::GetTelemetry(
    grpc::ServerContext*, const v1::GetTelemetryRequest* req,
    v1::GetTelemetryResponse* resp) {
  RpcScope scope(metrics_, "GetTelemetry");
  if (req->samples() < 0) {
    return scope.Finish(ToGrpcStatus(
        absl::InvalidArgumentError("samples must not be negative")));
  }
  ClusterView view = membership_->View();
  resp->set_epoch(view.epoch);
  for (const MemberView& mv : view.members) {
    const Member& m = mv.member;
    if (!IsLive(m.state)) continue;
    if (req->has_rank() && m.rank != req->rank()) continue;
    std::optional<TelemetrySnapshot> s =
        telemetry_->Get(m.worker_id, req->samples());
    if (!s.has_value()) continue;
    v1::RankTelemetry* r = resp->add_ranks();
    r->set_rank(m.rank);
    r->set_instance(mv.instance);
    r->set_worker_id(m.worker_id);
    r->set_name(m.name);
    r->set_reports(s->reports);
    SampleToProto(s->latest, r->mutable_latest());
    r->set_mean_step_ms(s->mean_step_ms);
    for (const auto& [name, ms] : s->mean_phases) {
      v1::PhaseTime* t = r->add_mean_phases();
      t->set_phase(name);
      t->set_ms(ms);
    }
    r->set_bytes_per_s(s->bytes_per_s);
    for (const auto& [name, bytes] : s->latest.memory_bytes) {
      (*r->mutable_memory_bytes())[name] = bytes;
    }
    for (const TelemetryPoint& p : s->samples) {
      SampleToProto(p, r->add_samples());
    }
  }
  Aggregate(resp);
  return scope.Finish(grpc::Status::OK);
}

grpc::Status DashboardServiceImpl::GetLedger(grpc::ServerContext*,
                                             const v1::GetLedgerRequest*,
                                             v1::GetLedgerResponse* resp) {
  RpcScope scope(metrics_, "GetLedger");
  return scope.Finish(ToGrpcStatus(Ledger(resp)));
}

std::string DashboardServiceImpl::RenderLedgerMetrics() {
  std::string out =
      "# HELP zshard_rank_memory_predicted_bytes The planner's ZeRO-1 "
      "prediction of a rank's memory by category.\n"
      "# TYPE zshard_rank_memory_predicted_bytes gauge\n";
  v1::GetLedgerResponse ledger;
  if (!Ledger(&ledger).ok()) return out;  // no epoch yet: no samples
  for (const v1::RankLedger& r : ledger.ranks()) {
    for (const auto& [name, c] : r.categories()) {
      absl::StrAppend(&out, "zshard_rank_memory_predicted_bytes{rank=\"",
                      r.rank(), "\",worker=\"", EscapeLabelValue(r.worker()),
                      "\",category=\"", name, "\"} ", c.predicted(), "\n");
    }
  }
  return out;
}

absl::Status DashboardServiceImpl::Ledger(v1::GetLedgerResponse* resp) {
  EpochPlan committed = membership_->CommittedPlan();
  if (committed.epoch == 0) {
    return absl::FailedPreconditionError("no epoch is committed yet");
  }
  resp->set_stage(plan::StageName(plan::Stage::kZero1));
  resp->set_epoch(committed.epoch);
  resp->set_world(committed.world);
  resp->set_instances(committed.instances);
  const plan::ParallelSizes& sizes = membership_->spec().parallel;
  if (sizes.model_parallel()) {
    // Each rank's prediction is its slot's plan's at its data-parallel
    // rank; the stages are per slot (no whole-model row).
    ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<const CachedParallelPlan> parallel,
                            plans_.GetParallel(committed));
    for (int r = 0; r < committed.world; ++r) {
      const plan::Position pos = plan::PositionOf(sizes, committed.world, r);
      const int dp = plan::DataParallelRank(sizes, pos);
      const CachedPlan& slot = *parallel->slots[static_cast<size_t>(
          plan::SlotIndex(sizes, pos.tp, pos.pp))];
      v1::RankLedger* out = AddRankLedger(
          committed, r,
          plan::RankStageBytes(*slot.model, slot.plan, dp, plan::Stage::kZero1),
          resp);
      out->mutable_slot()->set_tp(pos.tp);
      out->mutable_slot()->set_pp(pos.pp);
      out->set_dp_rank(dp);
    }
    return absl::OkStatus();
  }
  ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<const CachedPlan> cached,
                          plans_.Get(committed));
  const plan::Plan& p = cached->plan;
  const plan::ModelSpec& model = membership_->spec().model;
  ZSHARD_ASSIGN_OR_RETURN(plan::Ledger ledger, plan::ComputeLedger(model, p));
  for (int s = 0; s < plan::kNumStages; ++s) {
    const plan::StageBytes& b = ledger.stages[s];
    v1::StageLedger* out = resp->add_stages();
    out->set_stage(plan::StageName(static_cast<plan::Stage>(s)));
    out->set_param_bytes(b.param_bytes);
    out->set_grad_bytes(b.grad_bytes);
    out->set_master_bytes(b.master_bytes);
    out->set_exp_avg_bytes(b.exp_avg_bytes);
    out->set_exp_avg_sq_bytes(b.exp_avg_sq_bytes);
    out->set_total_bytes(b.total_bytes);
  }
  for (int r = 0; r < committed.world; ++r) {
    AddRankLedger(committed, r,
                  plan::RankStageBytes(model, p, r, plan::Stage::kZero1), resp);
  }
  return absl::OkStatus();
}

v1::RankLedger* DashboardServiceImpl::AddRankLedger(
    const EpochPlan& committed, int rank, const plan::StageBytes& predicted,
    v1::GetLedgerResponse* resp) {
  const Slot& slot = committed.slots[rank];
  std::optional<std::map<std::string, int64_t>> measured;
  if (std::optional<TelemetrySnapshot> s = telemetry_->Get(slot.worker_id, 0);
      s.has_value() && s->latest.epoch == committed.epoch) {
    measured = s->latest.memory_bytes;
  }
  RankLedgerView v = MakeRankLedger(predicted, measured);
  v1::RankLedger* out = resp->add_ranks();
  out->set_rank(rank);
  out->set_worker(slot.name);
  out->set_worker_id(slot.worker_id);
  out->set_predicted_bytes(v.predicted_bytes);
  out->set_measured_bytes(v.measured_bytes);
  out->set_comm_bytes(v.comm_bytes);
  for (const auto& [name, c] : v.categories) {
    v1::LedgerCategory& cat = (*out->mutable_categories())[name];
    cat.set_predicted(c.predicted);
    cat.set_measured(c.measured);
  }
  return out;
}

}  // namespace zshard::server
