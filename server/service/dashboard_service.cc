// DashboardService adapter: status, plan and explain.
#include "server/service/dashboard_service.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/plan/moves.h"
#include "common/plan/plan.h"
#include "server/service/proto_convert.h"
#include "server/service/rpc_scope.h"
#include "server/views/explain.h"
#include "server/views/plan_index.h"

namespace zshard::server {
namespace {

constexpr int kDefaultPieces = 1000;
constexpr int kMaxPieces = 10000;
// GetPlan lists at most this many moves (GetPlanRequest.moves).
constexpr size_t kMaxListedMoves = 10000;

// The pieces a GetPlan request asks for, from the epoch's index.
grpc::Status FillPieces(const CachedPlan& cached, const EpochPlan& committed,
                        const v1::GetPlanRequest& req,
                        v1::GetPlanResponse* resp) {
  PieceQuery q;
  if (!req.param().empty()) {
    auto it = cached.index.param_by_name.find(req.param());
    if (it == cached.index.param_by_name.end()) {
      return ToGrpcStatus(absl::NotFoundError(
          absl::StrCat("param '", req.param(), "' is not in the model")));
    }
    q.param = it->second;
  }
  if (req.param_begin() < 0 || req.param_end() < 0) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("param_begin and param_end must be >= 0"));
  }
  q.begin = req.param_begin();
  q.end = req.param_end();
  if (req.has_rank()) q.rank = req.rank();
  if (req.has_bucket()) {
    q.bucket = req.bucket();
    q.buffer = req.buffer();
  }
  q.limit = req.page_size() <= 0 ? kDefaultPieces
                                 : std::min(req.page_size(), kMaxPieces);
  if (!req.page_token().empty()) {
    uint64_t start = 0;
    if (!absl::SimpleAtoi(req.page_token(), &start)) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("page token '", req.page_token(), "' is not valid")));
    }
    q.start = static_cast<size_t>(start);
  }
  PieceAnswer answer = QueryPieces(cached.index, q);
  const std::vector<std::string>& names = cached.index.ownership.param_names;
  const int d = cached.plan.shard_group_size;
  for (const plan::OwnedRange& r : answer.ranges) {
    v1::PlanPiece* out = resp->add_pieces();
    out->set_param(names[r.param_index]);
    out->set_param_begin(r.begin);
    out->set_param_end(r.end);
    out->set_rank(r.rank);
    out->set_instance(d > 0 ? r.rank / d : 0);
    if (r.rank < static_cast<int>(committed.slots.size())) {
      out->set_worker(committed.slots[r.rank].name);
    }
    out->set_buffer(r.buffer);
    out->set_bucket(r.bucket);
    out->set_offset_in_bucket(r.offset_in_bucket);
    out->set_expert_rank(r.expert_rank);
  }
  if (answer.next > 0) resp->set_next_page_token(absl::StrCat(answer.next));
  return grpc::Status::OK;
}

}  // namespace

grpc::Status DashboardServiceImpl::GetClusterStatus(
    grpc::ServerContext*, const v1::GetClusterStatusRequest*,
    v1::GetClusterStatusResponse* resp) {
  RpcScope scope(metrics_, "GetClusterStatus");
  ToProto(membership_->View(), resp);
  const plan::ParallelSizes& sizes = membership_->spec().parallel;
  if (sizes.model_parallel()) {
    resp->mutable_parallel()->set_tensor(sizes.tensor);
    resp->mutable_parallel()->set_pipeline(sizes.pipeline);
    resp->mutable_parallel()->set_context(sizes.context);
  }
  if (election_) {
    ElectionView view = election_();
    resp->set_leader(view.leader);
    resp->set_leader_http(view.leader_http);
    for (std::string& s : view.standbys) resp->add_standbys(std::move(s));
  }
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
  absl::StatusOr<std::shared_ptr<const CachedPlan>> cached =
      plans_.Get(committed);
  if (!cached.ok()) return scope.Finish(ToGrpcStatus(cached.status()));
  const plan::Plan* p = &(*cached)->plan;
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
  if (req->moves()) FillMoves(committed, (*cached)->index, resp);
  const bool pieces = !req->param().empty() || req->has_bucket();
  if (pieces) {
    grpc::Status s = FillPieces(**cached, committed, *req, resp);
    if (!s.ok()) return scope.Finish(s);
  }
  for (int r = 0; r < committed.world; ++r) {
    if (req->has_rank() && req->rank() != r) continue;
    if (pieces && !req->has_rank()) break;  // a piece query: no summaries
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

void DashboardServiceImpl::FillMoves(const EpochPlan& committed,
                                     const PlanIndex& index,
                                     v1::GetPlanResponse* resp) {
  // Names by worker id: the committed slots, then every member the view
  // still lists (a dead sender may be gone from both: its id is shown).
  std::map<std::string, std::string> names;
  for (const MemberView& m : membership_->View().members) {
    names[m.member.worker_id] = m.member.name;
  }
  for (const Slot& slot : committed.slots) names[slot.worker_id] = slot.name;
  auto name_of = [&names](const std::string& id) {
    auto it = names.find(id);
    return it == names.end() ? id : it->second;
  };
  resp->set_base_epoch(committed.base_epoch);
  resp->set_total_moves(static_cast<int32_t>(committed.moves.size()));
  const std::vector<std::string>& params = index.ownership.param_names;
  for (size_t i = 0; i < committed.moves.size() && i < kMaxListedMoves; ++i) {
    const plan::Move& m = committed.moves[i];
    v1::PlanMove* out = resp->add_moves();
    ToProto(m, static_cast<int>(i), out->mutable_move());
    if (m.param_index >= 0 &&
        static_cast<size_t>(m.param_index) < params.size()) {
      out->set_param(params[m.param_index]);
    }
    const bool member = m.source == plan::MoveSource::kMember;
    out->set_from_buffer(member ? m.source_buffer : -1);
    out->set_from_bucket(member ? m.source_bucket : -1);
    out->set_from_offset(member ? m.source_offset_in_bucket : -1);
    if (member) out->set_from_worker(name_of(m.source_member));
    out->set_to_worker(name_of(m.dest_member));
  }
}

void DashboardServiceImpl::WarmPlan() {
  EpochPlan committed = membership_->CommittedPlan();
  if (committed.epoch > 0) (void)plans_.Get(committed);  // cached if built
}

grpc::Status DashboardServiceImpl::Explain(grpc::ServerContext*,
                                           const v1::ExplainRequest*,
                                           v1::ExplainResponse* resp) {
  RpcScope scope(metrics_, "Explain");
  EventPage page = membership_->events()->After(
      std::max<int64_t>(0, membership_->events()->last_seq() - 64), 64);
  const ClusterView view = membership_->View();
  const job::JobSpec& spec = membership_->spec();
  for (const std::string& s : ExplainParallel(view, spec)) {
    resp->add_sentences(s);
  }
  for (const std::string& s :
       ExplainCluster(view, spec.world, page.events, spec.transition_settle_ms,
                      spec.parallel.model_parallel())) {
    resp->add_sentences(s);
  }
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
