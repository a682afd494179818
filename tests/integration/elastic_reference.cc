// Reference masters and dump comparison for the elastic integration tests.

#include "tests/integration/elastic_reference.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/reference_optimizer.h"
#include "client/worker/engine/workload_factory.h"
#include "common/plan/plan.h"
#include "common/status.h"

namespace zshard::testing {

absl::StatusOr<Masters> ReferenceMasters(const job::JobSpec& job, int world,
                                         int instances, int64_t steps) {
  return ReferenceMasters(
      job,
      std::vector<Topology>(static_cast<size_t>(std::max<int64_t>(0, steps)),
                            Topology{world, instances}));
}

absl::StatusOr<Masters> ReferenceMasters(const job::JobSpec& job,
                                         const std::vector<Topology>& by_step) {
  engine::ReferenceOptimizer::Options options;
  options.world = by_step.empty() ? 1 : by_step[0].world;
  options.instances = by_step.empty() ? 1 : by_step[0].instances;
  options.grad_reduce_in_fp32 = job.layout.grad_reduce_in_fp32;
  options.expert_parallel = job.layout.expert_parallel;
  options.optimizer = job.optimizer;
  // Expert-parallel rank e's experts start from the values of rank e of a
  // world of E (rank 0 of a world of 1 without experts).
  const int experts = job.layout.expert_parallel;
  std::vector<std::unique_ptr<engine::Workload>> init;
  std::vector<const engine::Workload*> init_ptrs;
  for (int e = 0; e < experts; ++e) {
    ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Workload> w,
                            engine::MakeWorkload(job, experts, e));
    init.push_back(std::move(w));
    init_ptrs.push_back(init.back().get());
  }
  engine::ReferenceOptimizer reference(job.model, options, init_ptrs);
  for (const Topology& t : by_step) {
    // Rank r of a world of W sums the samples b % W == r.
    std::vector<std::unique_ptr<engine::Workload>> ranks;
    std::vector<engine::Workload*> rank_workloads;
    for (int r = 0; r < t.world; ++r) {
      ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Workload> w,
                              engine::MakeWorkload(job, t.world, r));
      ranks.push_back(std::move(w));
      rank_workloads.push_back(ranks.back().get());
    }
    reference.set_topology(t.world, t.instances);
    ZSHARD_RETURN_IF_ERROR(reference.Step(rank_workloads).status());
  }
  Masters masters;
  for (size_t p = 0; p < job.model.params.size(); ++p) {
    masters.push_back(reference.master(static_cast<int>(p)));
  }
  return masters;
}

double MasterTolerance(const Masters& reference, int64_t steps) {
  float max_abs = 0;
  for (const std::vector<float>& param : reference) {
    for (float x : param) max_abs = std::max(max_abs, std::fabs(x));
  }
  return static_cast<double>(steps * 4 + 1) * std::ldexp(max_abs, -23);
}

double MaxDifference(const Masters& a, const Masters& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    if (a[p].size() != b[p].size()) {
      return std::numeric_limits<double>::infinity();
    }
    for (size_t i = 0; i < a[p].size(); ++i) {
      diff = std::max(diff, std::fabs(double{a[p][i]} - b[p][i]));
    }
  }
  return diff;
}

std::string DumpCheck::ToString() const {
  return absl::StrCat("max |dump - reference| ", max_diff, " (tolerance ",
                      tolerance, ", one step apart ", one_step,
                      "), ranks dumped [", absl::StrJoin(dumped_ranks, ","),
                      "]");
}

absl::StatusOr<DumpCheck> CheckDump(const std::string& dump_dir,
                                    const job::JobSpec& job,
                                    const std::vector<Topology>& by_step) {
  ZSHARD_ASSIGN_OR_RETURN(
      auto loaded,
      engine::LoadMasters(dump_dir, job.model, job.layout.expert_parallel));
  Masters dumped;
  for (const plan::ParamSpec& p : job.model.params) {
    auto it = loaded.find(p.name);
    if (it == loaded.end()) {
      return absl::NotFoundError(
          absl::StrCat("dump has no param '", p.name, "'"));
    }
    dumped.push_back(it->second);
  }
  if (by_step.empty()) {
    return absl::InvalidArgumentError("a dump check needs at least one step");
  }
  const int64_t steps = static_cast<int64_t>(by_step.size());
  ZSHARD_ASSIGN_OR_RETURN(Masters reference, ReferenceMasters(job, by_step));
  ZSHARD_ASSIGN_OR_RETURN(
      Masters previous,
      ReferenceMasters(
          job, std::vector<Topology>(by_step.begin(), by_step.end() - 1)));
  DumpCheck check;
  check.max_diff = MaxDifference(dumped, reference);
  check.tolerance = MasterTolerance(reference, steps);
  check.one_step = MaxDifference(reference, previous);
  static const std::regex kIndex(R"(index-([0-9]+)\.json)");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dump_dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, kIndex)) {
      check.dumped_ranks.push_back(std::stoi(match[1].str()));
    }
  }
  std::sort(check.dumped_ranks.begin(), check.dumped_ranks.end());
  return check;
}

absl::StatusOr<int64_t> OwnedElements(const job::JobSpec& job, int world,
                                      int rank) {
  ZSHARD_ASSIGN_OR_RETURN(
      plan::Plan plan,
      plan::MakePlan(job.model, job::JobPlanOptions(job, world)));
  ZSHARD_RETURN_IF_ERROR(plan::CheckRank(plan, rank));
  int64_t owned = 0;
  for (const plan::Shard& shard :
       plan::MakeRankPlan(job.model, plan, rank).shards) {
    for (const plan::Piece& piece : shard.pieces) {
      owned += piece.param_end - piece.param_start;
    }
  }
  return owned;
}

}  // namespace zshard::testing
