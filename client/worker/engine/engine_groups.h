// The communicator groups of one rank's step (docs/design.md sections 2, 4 and
// 5) and which group each plan buffer's collectives run in:
//
// - intra: the D ranks of the instance. Dense buffers are reduce-scattered
//   and all-gathered here, and the commit all-reduce starts here.
// - expert: the D / E ranks of the instance with the same expert-parallel
//   rank (shard_rank % E), ordered by expert shard index (shard_rank / E;
//   the expert-parallel rank varies fastest). Expert buffers are
//   reduce-scattered and all-gathered here when E > 1; with E = 1 this
//   group is the instance and intra serves.
// - inter: the ranks with the same shard_rank in every instance. They hold
//   the same dense window and, having the same expert-parallel rank and
//   expert shard index, the same expert window: the owned slices of both
//   kinds are all-reduced here, and the commit all-reduce ends here.
//
// A group of one rank gets no communicator (its collectives are no-ops).
//
// In a model-parallel job (common/job/job_slot.h) the plan is the slot's:
// its ranks are the slot's data-parallel ranks, and a SlotPlacement maps
// them to epoch ranks (for group members and failed peers) and adds
//
// - across: the ranks at this data-parallel rank in every slot. The commit
//   all-reduce ends here, so the grad norm, the non-finite count and the
//   loss span the whole world.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/worker/comm/communicator.h"
#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::engine {

// Where a rank sits in its plan's groups.
struct GroupPosition {
  int instance = 0;      // rank / D
  int shard_rank = 0;    // rank % D
  int expert_rank = 0;   // shard_rank % E: which experts' state it holds
  int expert_shard = 0;  // shard_rank / E: its shard of expert buckets
};

// The position of `rank` (0 <= rank < plan.world) under `plan`.
GroupPosition PositionOf(const plan::Plan& plan, int rank);

// The expert-parallel rank whose state of param `param_index` the rank
// holds: PositionOf(plan, rank).expert_rank for an expert param, 0 for a
// dense one (plan::OwnedRange::expert_rank, checkpoint and move ranges).
int StateExpertRank(const plan::ModelSpec& model, const plan::Plan& plan,
                    int rank, int param_index);

// One group: its rendezvous name, this rank's index in it and its members'
// world ranks in index order.
struct GroupSpec {
  std::string name;
  int rank = 0;
  std::vector<int> members;
  int size() const { return static_cast<int>(members.size()); }
};

struct EngineGroupSpecs {
  GroupSpec intra;   // "<prefix>/intra/<instance>"
  GroupSpec expert;  // "<prefix>/expert/<instance>/<expert rank>"
  GroupSpec inter;   // "<prefix>/inter/<shard_rank>"
  GroupSpec across;  // model-parallel only (SlotPlacement::across)
};

// Where a model-parallel rank's plan sits in the epoch; empty for a job
// without model parallelism.
struct SlotPlacement {
  // Plan rank r's epoch rank, by plan rank; empty: the same.
  std::vector<int> epoch_ranks;
  // The commit group across slots (name, this rank's index, epoch ranks).
  GroupSpec across;
};

// The groups of `rank` (0 <= rank < plan.world) under `plan`, their members
// as epoch ranks under `placement`.
EngineGroupSpecs MakeGroupSpecs(const plan::Plan& plan, int rank,
                                const std::string& prefix,
                                const SlotPlacement& placement = {});

// The communicators of one rank. Connect once; Abort from any thread after
// Connect returned.
class EngineGroups {
 public:
  // Joins the rendezvous of every group of more than one rank, intra, then
  // expert, then inter on every rank (so joins cannot wait in a cycle),
  // with `base`'s options but its rank, size and group. The communicator's
  // status on failure (those already made are kept, so Abort reaches them).
  // A model-parallel rank joins across last.
  absl::Status Connect(const plan::Plan& plan, int rank,
                       const std::string& prefix, const comm::CommOptions& base,
                       const SlotPlacement& placement = {});

  // The instance's group; null when D == 1.
  comm::Communicator* intra() const { return intra_.get(); }
  // The inter-instance group; null when I == 1.
  comm::Communicator* inter() const { return inter_.get(); }
  // The group across slots; null without model parallelism.
  comm::Communicator* across() const { return across_.get(); }
  // The group that reduce-scatters and all-gathers plan buffer `buffer`
  // (its shard group): null when it has one rank (or before Connect).
  comm::Communicator* shard_group(int buffer) const {
    return buffer >= 0 && buffer < static_cast<int>(by_buffer_.size())
               ? by_buffer_[buffer]
               : nullptr;
  }

  // Aborts every communicator. Thread-safe, idempotent.
  void Abort();

  // `status` with the epoch rank of the peer its transport named (a
  // comm::kEpochPeerPayload beside the transport's kPeerPayload) when that
  // peer's group is one of these; else `status` unchanged.
  absl::Status NameEpochPeer(absl::Status status) const;

 private:
  EngineGroupSpecs specs_;
  std::unique_ptr<comm::Communicator> intra_;
  std::unique_ptr<comm::Communicator> expert_;
  std::unique_ptr<comm::Communicator> inter_;
  std::unique_ptr<comm::Communicator> across_;
  std::vector<comm::Communicator*> by_buffer_;
};

}  // namespace zshard::engine
