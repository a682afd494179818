// EngineGroups: the group arithmetic of docs/design.md sections 2 and 4 and the
// communicators joined for it.
#include "client/worker/engine/engine_groups.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/worker/comm/failed_peer.h"
#include "common/status.h"

namespace zshard::engine {

GroupPosition PositionOf(const plan::Plan& plan, int rank) {
  const int d = plan.shard_group_size;
  const int e = plan.layout.expert_parallel;
  GroupPosition p;
  p.instance = rank / d;
  p.shard_rank = rank % d;
  p.expert_rank = p.shard_rank % e;
  p.expert_shard = p.shard_rank / e;
  return p;
}

int StateExpertRank(const plan::ModelSpec& model, const plan::Plan& plan,
                    int rank, int param_index) {
  if (!model.params[param_index].expert) return 0;
  return PositionOf(plan, rank).expert_rank;
}

EngineGroupSpecs MakeGroupSpecs(const plan::Plan& plan, int rank,
                                const std::string& prefix,
                                const SlotPlacement& placement) {
  const int d = plan.shard_group_size;
  const int e = plan.layout.expert_parallel;
  const GroupPosition pos = PositionOf(plan, rank);
  const int first = pos.instance * d;
  EngineGroupSpecs out;
  out.intra.name = absl::StrCat(prefix, "/intra/", pos.instance);
  out.intra.rank = pos.shard_rank;
  for (int s = 0; s < d; ++s) out.intra.members.push_back(first + s);
  out.expert.name =
      absl::StrCat(prefix, "/expert/", pos.instance, "/", pos.expert_rank);
  out.expert.rank = pos.expert_shard;
  for (int k = 0; k < d / e; ++k) {
    out.expert.members.push_back(first + k * e + pos.expert_rank);
  }
  out.inter.name = absl::StrCat(prefix, "/inter/", pos.shard_rank);
  out.inter.rank = pos.instance;
  for (int i = 0; i < plan.instances; ++i) {
    out.inter.members.push_back(i * d + pos.shard_rank);
  }
  if (!placement.epoch_ranks.empty()) {
    for (GroupSpec* spec : {&out.intra, &out.expert, &out.inter}) {
      for (int& member : spec->members) {
        member = placement.epoch_ranks[static_cast<size_t>(member)];
      }
    }
  }
  out.across = placement.across;
  return out;
}

absl::Status EngineGroups::Connect(const plan::Plan& plan, int rank,
                                   const std::string& prefix,
                                   const comm::CommOptions& base,
                                   const SlotPlacement& placement) {
  specs_ = MakeGroupSpecs(plan, rank, prefix, placement);
  const EngineGroupSpecs& specs = specs_;
  const bool own_expert = plan.layout.expert_parallel > 1;
  auto join = [&](const GroupSpec& spec,
                  std::unique_ptr<comm::Communicator>* out) -> absl::Status {
    if (spec.size() <= 1) return absl::OkStatus();
    comm::CommOptions co = base;
    co.rank = spec.rank;
    co.size = spec.size();
    co.group = spec.name;
    ZSHARD_ASSIGN_OR_RETURN(*out, comm::CreateCommunicator(co));
    return absl::OkStatus();
  };
  ZSHARD_RETURN_IF_ERROR(join(specs.intra, &intra_));
  if (own_expert) ZSHARD_RETURN_IF_ERROR(join(specs.expert, &expert_));
  ZSHARD_RETURN_IF_ERROR(join(specs.inter, &inter_));
  ZSHARD_RETURN_IF_ERROR(join(specs.across, &across_));
  by_buffer_.clear();
  for (const plan::Buffer& b : plan.buffers) {
    by_buffer_.push_back(b.key.expert && own_expert ? expert_.get()
                                                    : intra_.get());
  }
  return absl::OkStatus();
}

absl::Status EngineGroups::NameEpochPeer(absl::Status status) const {
  std::optional<comm::FailedPeer> peer = comm::FailedPeerOf(status);
  if (!peer.has_value()) return status;
  for (const GroupSpec* spec :
       {&specs_.intra, &specs_.expert, &specs_.inter, &specs_.across}) {
    if (spec->name != peer->group || peer->rank >= spec->size()) continue;
    comm::FailedPeer epoch_peer = *peer;
    epoch_peer.rank = spec->members[static_cast<size_t>(peer->rank)];
    return comm::WithFailedPeer(std::move(status), epoch_peer,
                                comm::kEpochPeerPayload);
  }
  return status;
}

void EngineGroups::Abort() {
  if (intra_) intra_->Abort();
  if (expert_) expert_->Abort();
  if (inter_) inter_->Abort();
  if (across_) across_->Abort();
}

}  // namespace zshard::engine
