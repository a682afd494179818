// Model-parallel positions (docs/design.md section 13): the tensor (T),
// pipeline (P) and context (C) parallel sizes, where each worker rank of a
// world sits in (replica, tp, pp, cp), and the model-parallel slots (tp, pp)
// whose data-parallel domains the optimizer state is sharded over.
//
// Rank order: Megatron-LM's default, "tp-cp-ep-dp-pp": tp varies fastest,
// then cp, then the replica (Megatron's data-parallel rank), then pp:
//   rank = tp + T * (cp + C * (replica + R * pp)),  R = W / (T * P * C).
// A slot's data-parallel rank (its rank in Megatron's data-parallel group
// with context parallelism) is cp + C * replica: the group's ranks in
// global rank order.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "common/plan/model_spec.h"

namespace zshard::plan {

// The model-parallel sizes of a job; every field >= 1.
struct ParallelSizes {
  int tensor = 1;    // T
  int pipeline = 1;  // P
  int context = 1;   // C

  // T * P: the number of slots (tp, pp).
  int slots() const { return tensor * pipeline; }
  // T * P * C: the workers of one replica.
  int replica_size() const { return tensor * pipeline * context; }
  // Whether any size is above 1.
  bool model_parallel() const { return replica_size() > 1; }
  bool operator==(const ParallelSizes& o) const {
    return tensor == o.tensor && pipeline == o.pipeline && context == o.context;
  }
};

// Where a worker rank sits.
struct Position {
  int replica = 0;  // in [0, R)
  int tp = 0;       // in [0, T)
  int pp = 0;       // in [0, P)
  int cp = 0;       // in [0, C)
  bool operator==(const Position& o) const {
    return replica == o.replica && tp == o.tp && pp == o.pp && cp == o.cp;
  }
};

// OK when every size is >= 1 and `world` is a positive multiple of T*P*C;
// else InvalidArgument naming the size or the world.
absl::Status CheckParallelWorld(const ParallelSizes& sizes, int world);

// OK when a checkpoint written with model-parallel sizes `written` can
// restore into a job of sizes `job`: the same tensor and pipeline sizes
// (each slot's param space; context, replicas and instances may differ).
// Otherwise InvalidArgument in one line naming both: "the checkpoint was
// written with tensor 2, pipeline 2, context 1; this job has tensor 4,
// pipeline 2, context 1: restore needs the same tensor and pipeline
// sizes".
absl::Status CheckRestoreSizes(const ParallelSizes& written,
                               const ParallelSizes& job);

// R = W / (T * P * C). Requires CheckParallelWorld(sizes, world).
int Replicas(const ParallelSizes& sizes, int world);
// R * C: the size of every slot's data-parallel domain.
int DataParallelSize(const ParallelSizes& sizes, int world);

// The slot index of (tp, pp): tp + T * pp (tp fastest, as in the rank
// order). Slots are listed in this order everywhere.
int SlotIndex(const ParallelSizes& sizes, int tp, int pp);
// The inverse: {tp, pp} of slot index `slot`.
int SlotTp(const ParallelSizes& sizes, int slot);
int SlotPp(const ParallelSizes& sizes, int slot);

// The position of `rank` and its inverse, in the order above. Require
// CheckParallelWorld(sizes, world), 0 <= rank < world and a position in
// range.
Position PositionOf(const ParallelSizes& sizes, int world, int rank);
int RankOf(const ParallelSizes& sizes, int world, const Position& position);

// A position's data-parallel rank in its slot: cp + C * replica.
int DataParallelRank(const ParallelSizes& sizes, const Position& position);
// The position at data-parallel rank `dp_rank` of slot (tp, pp).
Position PositionOfDataParallelRank(const ParallelSizes& sizes, int tp, int pp,
                                    int dp_rank);

// The global ranks of `rank`'s slot data-parallel domain, in data-parallel
// rank order (R * C ranks). Requires what PositionOf requires.
std::vector<int> DataParallelGroup(const ParallelSizes& sizes, int world,
                                   int rank);

// Whether a param's gradient counts in the global grad norm on tensor
// rank `tp`: always, unless it is tp_replicated and tp != 0 (Megatron's
// param_is_not_tensor_parallel_duplicate).
bool CountsInGradNorm(const ParamSpec& param, int tp);

}  // namespace zshard::plan
