// DashboardService adapter.
#include "server/service/dashboard_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/plan/plan.h"
#include "server/service/proto_convert.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {

grpc::Status DashboardServiceImpl::GetClusterStatus(
    grpc::ServerContext*, const v1::GetClusterStatusRequest*,
    v1::GetClusterStatusResponse* resp) {
  RpcScope scope(metrics_, "GetClusterStatus");
  ToProto(membership_->View(), resp);
  return scope.Finish(grpc::Status::OK);
}

grpc::Status DashboardServiceImpl::GetPlan(grpc::ServerContext*,
                                           const v1::GetPlanRequest* req,
                                           v1::GetPlanResponse* resp) {
  RpcScope scope(metrics_, "GetPlan");
  EpochPlan committed = membership_->CommittedPlan();
  if (committed.epoch == 0) {
    return scope.Finish(ToGrpcStatus(
        absl::FailedPreconditionError("no epoch is committed yet")));
  }
  if (req->has_rank() && (req->rank() < 0 || req->rank() >= committed.world)) {
    return scope.Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "rank ", req->rank(), " is not in [0, ", committed.world, ")"))));
  }
  const job::JobSpec& spec = membership_->spec();
  absl::StatusOr<plan::Plan> p =
      plan::MakePlan(spec.model, job::JobPlanOptions(spec, committed.world));
  if (!p.ok()) return scope.Finish(ToGrpcStatus(p.status()));
  resp->set_epoch(committed.epoch);
  resp->set_world(p->world);
  resp->set_instances(p->instances);
  resp->set_shard_group_size(p->shard_group_size);
  resp->set_bucket_size(p->bucket_size);
  resp->set_plan_hash(p->hash);
  for (const plan::Buffer& b : p->buffers) {
    v1::BufferSummary* s = resp->add_buffers();
    s->set_param_dtype(plan::DTypeName(b.key.param_dtype));
    s->set_grad_dtype(plan::DTypeName(b.key.grad_dtype));
    s->set_expert(b.key.expert);
    s->set_shard_group_size(b.shard_group_size);
    s->set_numel(b.numel);
    s->set_buckets(static_cast<int32_t>(b.buckets.size()));
    s->set_params(static_cast<int32_t>(b.params.size()));
  }
  for (int r = 0; r < committed.world; ++r) {
    if (req->has_rank() && req->rank() != r) continue;
    plan::RankPlan rp = plan::MakeRankPlan(spec.model, *p, r);
    v1::RankSummary* s = resp->add_ranks();
    s->set_rank(r);
    s->set_instance(rp.instance);
    s->set_shard_rank(rp.shard_rank);
    s->set_worker_id(committed.slots[r].worker_id);
    s->set_name(committed.slots[r].name);
    int64_t owned = 0;
    int32_t pieces = 0;
    for (const plan::Shard& shard : rp.shards) {
      for (const plan::Piece& piece : shard.pieces) {
        owned += piece.end - piece.start;
        ++pieces;
      }
    }
    s->set_owned_elements(owned);
    s->set_pieces(pieces);
  }
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
