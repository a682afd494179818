// Model-parallel positions in Megatron's default rank order (tp, cp, dp,
// pp; tp fastest).
#include "common/plan/parallel.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace zshard::plan {

absl::Status CheckParallelWorld(const ParallelSizes& sizes, int world) {
  const struct {
    const char* name;
    int value;
  } fields[] = {{"tensor", sizes.tensor},
                {"pipeline", sizes.pipeline},
                {"context", sizes.context}};
  for (const auto& f : fields) {
    if (f.value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parallel.", f.name, " must be >= 1 (got ", f.value, ")"));
    }
  }
  const int64_t replica = int64_t{sizes.tensor} * sizes.pipeline *
                          static_cast<int64_t>(sizes.context);
  if (world < 1 || world % replica != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world (", world,
                     ") is not a positive multiple of tensor x pipeline x "
                     "context (",
                     replica, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckRestoreSizes(const ParallelSizes& written,
                               const ParallelSizes& job) {
  if (written.tensor == job.tensor && written.pipeline == job.pipeline) {
    return absl::OkStatus();
  }
  auto shape = [](const ParallelSizes& s) {
    return absl::StrCat("tensor ", s.tensor, ", pipeline ", s.pipeline,
                        ", context ", s.context);
  };
  return absl::InvalidArgumentError(absl::StrCat(
      "the checkpoint was written with ", shape(written), "; this job has ",
      shape(job), ": restore needs the same tensor and pipeline sizes"));
}

int Replicas(const ParallelSizes& sizes, int world) {
  return world / sizes.replica_size();
}

int DataParallelSize(const ParallelSizes& sizes, int world) {
  return Replicas(sizes, world) * sizes.context;
}

int SlotIndex(const ParallelSizes& sizes, int tp, int pp) {
  return tp + sizes.tensor * pp;
}

int SlotTp(const ParallelSizes& sizes, int slot) { return slot % sizes.tensor; }

int SlotPp(const ParallelSizes& sizes, int slot) { return slot / sizes.tensor; }

Position PositionOf(const ParallelSizes& sizes, int world, int rank) {
  const int r = Replicas(sizes, world);
  Position p;
  p.tp = rank % sizes.tensor;
  rank /= sizes.tensor;
  p.cp = rank % sizes.context;
  rank /= sizes.context;
  p.replica = rank % r;
  p.pp = rank / r;
  return p;
}

int RankOf(const ParallelSizes& sizes, int world, const Position& position) {
  const int r = Replicas(sizes, world);
  return position.tp +
         sizes.tensor * (position.cp +
                         sizes.context * (position.replica + r * position.pp));
}

int DataParallelRank(const ParallelSizes& sizes, const Position& position) {
  return position.cp + sizes.context * position.replica;
}

Position PositionOfDataParallelRank(const ParallelSizes& sizes, int tp, int pp,
                                    int dp_rank) {
  Position p;
  p.tp = tp;
  p.pp = pp;
  p.cp = dp_rank % sizes.context;
  p.replica = dp_rank / sizes.context;
  return p;
}

std::vector<int> DataParallelGroup(const ParallelSizes& sizes, int world,
                                   int rank) {
  const Position me = PositionOf(sizes, world, rank);
  std::vector<int> group;
  const int n = DataParallelSize(sizes, world);
  group.reserve(n);
  for (int k = 0; k < n; ++k) {
    group.push_back(RankOf(sizes, world,
                           PositionOfDataParallelRank(sizes, me.tp, me.pp, k)));
  }
  return group;
}

bool CountsInGradNorm(const ParamSpec& param, int tp) {
  return !param.tp_replicated || tp == 0;
}

}  // namespace zshard::plan
