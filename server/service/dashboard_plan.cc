// DashboardService adapter: GetPlan. A job without model parallelism
// answers from its one plan; a model-parallel job from its slot's plan
// (GetPlanRequest.slot) or with every slot's summary.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/plan/moves.h"
#include "common/plan/parallel.h"
#include "common/plan/plan.h"
#include "common/status.h"
#include "server/service/dashboard_service.h"
#include "server/service/proto_convert.h"
#include "server/service/rpc_scope.h"
#include "server/views/plan_index.h"

namespace zshard::server {
namespace {

namespace pb = google::protobuf;

constexpr int kDefaultPieces = 1000;
constexpr int kMaxPieces = 10000;
// GetPlan lists at most this many moves (GetPlanRequest.moves).
constexpr size_t kMaxListedMoves = 10000;

// The pieces a GetPlan request asks for, from the plan's index.
absl::Status FillPieces(const CachedPlan& cached, const v1::GetPlanRequest& req,
                        v1::GetPlanResponse* resp) {
  PieceQuery q;
  if (!req.param().empty()) {
    auto it = cached.index.param_by_name.find(req.param());
    if (it == cached.index.param_by_name.end()) {
      return absl::NotFoundError(
          absl::StrCat("param '", req.param(), "' is not in the model"));
    }
    q.param = it->second;
  }
  if (req.param_begin() < 0 || req.param_end() < 0) {
    return absl::InvalidArgumentError("param_begin and param_end must be >= 0");
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
      return absl::InvalidArgumentError(
          absl::StrCat("page token '", req.page_token(), "' is not valid"));
    }
    q.start = static_cast<size_t>(start);
  }
  PieceAnswer answer = QueryPieces(cached.index, q);
  const std::vector<std::string>& names = cached.index.ownership.param_names;
  const std::vector<Slot>& holders = cached.ranks.slots;
  const int d = cached.plan.shard_group_size;
  for (const plan::OwnedRange& r : answer.ranges) {
    v1::PlanPiece* out = resp->add_pieces();
    out->set_param(names[r.param_index]);
    out->set_param_begin(r.begin);
    out->set_param_end(r.end);
    out->set_rank(r.rank);
    out->set_instance(d > 0 ? r.rank / d : 0);
    if (r.rank < static_cast<int>(holders.size())) {
      out->set_worker(holders[r.rank].name);
    }
    out->set_buffer(r.buffer);
    out->set_bucket(r.bucket);
    out->set_offset_in_bucket(r.offset_in_bucket);
    out->set_expert_rank(r.expert_rank);
  }
  if (answer.next > 0) resp->set_next_page_token(absl::StrCat(answer.next));
  return absl::OkStatus();
}

void AddBuffers(const plan::Plan& p,
                pb::RepeatedPtrField<v1::BufferSummary>* out) {
  for (const plan::Buffer& b : p.buffers) {
    v1::BufferSummary* s = out->Add();
    s->set_param_dtype(plan::DTypeName(b.key.param_dtype));
    s->set_grad_dtype(plan::DTypeName(b.key.grad_dtype));
    s->set_expert(b.key.expert);
    s->set_shard_group_size(b.shard_group_size);
    s->set_numel(b.numel);
    s->set_buckets(static_cast<int32_t>(b.buckets.size()));
    s->set_params(static_cast<int32_t>(b.params.size()));
  }
}

// The summary of every rank of `cached` (only `only` when >= 0).
void AddRanks(const CachedPlan& cached, int only,
              pb::RepeatedPtrField<v1::RankSummary>* out) {
  const EpochPlan& ranks = cached.ranks;
  for (int r = 0; r < ranks.world && r < static_cast<int>(ranks.slots.size());
       ++r) {
    if (only >= 0 && only != r) continue;
    plan::RankPlan rp = plan::MakeRankPlan(*cached.model, cached.plan, r);
    v1::RankSummary* s = out->Add();
    s->set_rank(r);
    s->set_instance(rp.instance);
    s->set_shard_rank(rp.shard_rank);
    s->set_worker_id(ranks.slots[r].worker_id);
    s->set_name(ranks.slots[r].name);
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
}

// The slot index of `slot`; InvalidArgument outside T x P.
absl::StatusOr<int> SlotIndexOf(const plan::ParallelSizes& sizes,
                                const v1::ParallelSlot& slot) {
  if (slot.tp() < 0 || slot.tp() >= sizes.tensor || slot.pp() < 0 ||
      slot.pp() >= sizes.pipeline) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slot (tp ", slot.tp(), ", pp ", slot.pp(), ") is not in the job's ",
        sizes.tensor, " x ", sizes.pipeline, " slots"));
  }
  return plan::SlotIndex(sizes, slot.tp(), slot.pp());
}

}  // namespace

grpc::Status DashboardServiceImpl::GetPlan(grpc::ServerContext*,
                                           const v1::GetPlanRequest* req,
                                           v1::GetPlanResponse* resp) {
  RpcScope scope(metrics_, "GetPlan");
  return scope.Finish(ToGrpcStatus(Plan(*req, resp)));
}

absl::Status DashboardServiceImpl::Plan(const v1::GetPlanRequest& req,
                                        v1::GetPlanResponse* resp) {
  EpochPlan committed = membership_->CommittedPlan();
  if (committed.epoch == 0) {
    return absl::FailedPreconditionError("no epoch is committed yet");
  }
  const job::JobSpec& spec = membership_->spec();
  const plan::ParallelSizes& sizes = spec.parallel;
  if (!sizes.model_parallel()) {
    if (req.has_slot()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job '", spec.name,
                       "' is not model-parallel: its plan has no slots"));
    }
    ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<const CachedPlan> cached,
                            plans_.Get(committed));
    return FillPlan(*cached, req, resp);
  }
  ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<const CachedParallelPlan> parallel,
                          plans_.GetParallel(committed));
  if (req.has_slot()) {
    ZSHARD_ASSIGN_OR_RETURN(const int slot, SlotIndexOf(sizes, req.slot()));
    *resp->mutable_slot() = req.slot();
    return FillPlan(*parallel->slots[static_cast<size_t>(slot)], req, resp);
  }
  if (req.has_rank() || !req.param().empty() || req.has_bucket() ||
      req.moves()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", spec.name,
        "' is model-parallel: ask for a rank, param, bucket or moves with a "
        "slot (tp, pp)"));
  }
  resp->set_epoch(committed.epoch);
  resp->set_world(committed.world);
  resp->set_instances(committed.instances);
  resp->set_plan_hash(committed.plan_hash);
  for (int s = 0; s < sizes.slots(); ++s) {
    v1::SlotPlan* out = resp->add_slots();
    out->mutable_slot()->set_tp(plan::SlotTp(sizes, s));
    out->mutable_slot()->set_pp(plan::SlotPp(sizes, s));
    *out->mutable_plan()->mutable_slot() = out->slot();
    ZSHARD_RETURN_IF_ERROR(FillPlan(*parallel->slots[static_cast<size_t>(s)],
                                    v1::GetPlanRequest(), out->mutable_plan()));
  }
  return absl::OkStatus();
}

absl::Status DashboardServiceImpl::FillPlan(const CachedPlan& cached,
                                            const v1::GetPlanRequest& req,
                                            v1::GetPlanResponse* resp) {
  const plan::Plan& p = cached.plan;
  if (req.has_rank() && (req.rank() < 0 || req.rank() >= p.world)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", req.rank(), " is not in [0, ", p.world, ")"));
  }
  resp->set_epoch(cached.epoch);
  resp->set_world(p.world);
  resp->set_instances(p.instances);
  resp->set_shard_group_size(p.shard_group_size);
  resp->set_bucket_size(p.bucket_size);
  resp->set_plan_hash(p.hash);
  AddBuffers(p, resp->mutable_buffers());
  if (req.moves()) FillMoves(cached, resp);
  const bool pieces = !req.param().empty() || req.has_bucket();
  if (pieces) ZSHARD_RETURN_IF_ERROR(FillPieces(cached, req, resp));
  // A piece query has no summaries unless it names its rank.
  if (!pieces || req.has_rank()) {
    AddRanks(cached, req.has_rank() ? req.rank() : -1, resp->mutable_ranks());
  }
  return absl::OkStatus();
}

void DashboardServiceImpl::FillMoves(const CachedPlan& cached,
                                     v1::GetPlanResponse* resp) {
  const EpochPlan& committed = cached.ranks;
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
  const std::vector<std::string>& params = cached.index.ownership.param_names;
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

}  // namespace zshard::server
