// zshard-plan-bench: times the planner on a preset layout, MakePlan plus
// MakeRankPlan for every rank of the world, and reports min and median.
// With --tensor, --pipeline or --context above 1 it times the model-parallel
// planner instead: MakeParallelPlan (the preset split by PresetParallelModel,
// not timed) plus MakeWorkerPlan for every worker rank.
//   zshard-plan-bench [--preset NAME] [--world W] [--instances I]
//                     [--tensor T] [--pipeline P] [--context C]
//                     [--iterations N] [--output table|json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/plan/parallel_plan.h"
#include "common/plan/plan.h"
#include "common/plan/preset_slots.h"
#include "common/plan/presets.h"

ABSL_FLAG(std::string, preset, "llama2-70b", "the preset model");
ABSL_FLAG(int, world, 1024, "ranks");
ABSL_FLAG(int, instances, 8, "model instances");
ABSL_FLAG(int, iterations, 20, "timed iterations");
ABSL_FLAG(int, tensor, 1, "tensor-parallel size T");
ABSL_FLAG(int, pipeline, 1, "pipeline-parallel size P");
ABSL_FLAG(int, context, 1, "context-parallel size C");
ABSL_FLAG(std::string, output, "table", "table or json");

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Sample {
  double plan_ms = 0;
  double ranks_ms = 0;
  double total_ms() const { return plan_ms + ranks_ms; }
};

// The fastest sample and the median (by total time); `samples` not empty.
std::pair<Sample, Sample> MinAndMedian(std::vector<Sample> samples) {
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) {
              return a.total_ms() < b.total_ms();
            });
  return {samples.front(), samples[samples.size() / 2]};
}

constexpr char kUsage[] =
    "usage: zshard-plan-bench [--preset NAME] [--world W] [--instances I] "
    "[--tensor T] [--pipeline P] [--context C] [--iterations N] "
    "[--output table|json]\n";

zshard::FlagList PlanBenchFlags() {
  using zshard::FlagOf;
  return {FlagOf(FLAGS_preset),    FlagOf(FLAGS_world),
          FlagOf(FLAGS_instances), FlagOf(FLAGS_iterations),
          FlagOf(FLAGS_tensor),    FlagOf(FLAGS_pipeline),
          FlagOf(FLAGS_context),   FlagOf(FLAGS_output)};
}

int Fail(absl::string_view message) {
  return zshard::UsageError("zshard-plan-bench", message);
}

// The model-parallel planner: MakeParallelPlan plus MakeWorkerPlan for every
// worker rank, per iteration.
int RunParallel(const std::string& preset, int world, int instances,
                const zshard::plan::ParallelSizes& sizes, int iterations,
                const std::string& output) {
  namespace plan = zshard::plan;
  absl::StatusOr<plan::ParallelModel> model =
      plan::PresetParallelModel(preset, sizes);
  if (!model.ok()) {
    std::fprintf(stderr, "zshard-plan-bench: %s\n",
                 std::string(model.status().message()).c_str());
    return 2;
  }
  plan::ParallelPlanOptions options;
  options.world = world;
  options.instances = instances;
  std::vector<Sample> samples;
  size_t buckets = 0, shards = 0, pieces = 0;
  std::string hash;
  for (int it = 0; it < iterations; ++it) {
    Sample s;
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<plan::ParallelPlan> p =
        plan::MakeParallelPlan(*model, options);
    const Clock::time_point t1 = Clock::now();
    if (!p.ok()) {
      std::fprintf(stderr, "zshard-plan-bench: %s\n",
                   std::string(p.status().message()).c_str());
      return 2;
    }
    shards = pieces = 0;
    for (int r = 0; r < p->world; ++r) {
      plan::WorkerPlan w = plan::MakeWorkerPlan(*model, *p, r);
      shards += w.shards.shards.size();
      for (const auto& shard : w.shards.shards) pieces += shard.pieces.size();
    }
    const Clock::time_point t2 = Clock::now();
    buckets = 0;
    for (const plan::Plan& slot : p->slots) {
      for (const auto& b : slot.buffers) buckets += b.buckets.size();
    }
    hash = p->hash;
    s.plan_ms = Ms(t1 - t0);
    s.ranks_ms = Ms(t2 - t1);
    samples.push_back(s);
  }
  const auto [min, median] = MinAndMedian(samples);
  if (output == "json") {
    std::printf(
        "{\"preset\": \"%s\", \"world\": %d, \"instances\": %d, "
        "\"tensor\": %d, \"pipeline\": %d, \"context\": %d, "
        "\"iterations\": %d, \"slots\": %d, \"buckets\": %zu, "
        "\"shards\": %zu, \"pieces\": %zu, \"plan_hash\": \"%s\", "
        "\"min_ms\": %.3f, \"median_ms\": %.3f, "
        "\"median_make_plan_ms\": %.3f, \"median_worker_plans_ms\": %.3f}\n",
        preset.c_str(), world, instances, sizes.tensor, sizes.pipeline,
        sizes.context, iterations, sizes.slots(), buckets, shards, pieces,
        hash.c_str(), min.total_ms(), median.total_ms(), median.plan_ms,
        median.ranks_ms);
    return 0;
  }
  std::printf(
      "planner: %s  W=%d  I=%d  T=%d P=%d C=%d  (%d slots, %zu buckets, %zu "
      "shards, %zu pieces)\n"
      "  MakeParallelPlan + MakeWorkerPlan x %d workers, %d iterations\n"
      "  min %.3f ms  median %.3f ms  (median MakeParallelPlan %.3f ms, "
      "worker plans %.3f ms)\n",
      preset.c_str(), world, instances, sizes.tensor, sizes.pipeline,
      sizes.context, sizes.slots(), buckets, shards, pieces, world, iterations,
      min.total_ms(), median.total_ms(), median.plan_ms, median.ranks_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const zshard::FlagList flags = PlanBenchFlags();
  auto parsed = zshard::ParseCommandLine(zshard::Args(argc, argv), flags);
  if (!parsed.ok()) return Fail(parsed.status().message());
  if (parsed->help()) {
    std::printf("%s\n%s", kUsage, zshard::FlagsHelp(flags).c_str());
    return 0;
  }
  if (absl::Status s = zshard::CheckRange(FLAGS_iterations, 1, 1 << 24);
      !s.ok()) {
    return Fail(s.message());
  }
  const std::string preset = absl::GetFlag(FLAGS_preset);
  const std::string output = absl::GetFlag(FLAGS_output);
  const int world = absl::GetFlag(FLAGS_world);
  const int instances = absl::GetFlag(FLAGS_instances);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  const zshard::plan::ParallelSizes sizes{absl::GetFlag(FLAGS_tensor),
                                          absl::GetFlag(FLAGS_pipeline),
                                          absl::GetFlag(FLAGS_context)};
  if (sizes.model_parallel()) {
    return RunParallel(preset, world, instances, sizes, iterations, output);
  }
  absl::StatusOr<zshard::plan::ModelSpec> model =
      zshard::plan::PresetModel(preset);
  if (!model.ok()) {
    std::fprintf(stderr, "zshard-plan-bench: %s\n",
                 std::string(model.status().message()).c_str());
    return 2;
  }
  zshard::plan::PlanOptions options;
  options.world = world;
  options.instances = instances;
  std::vector<Sample> samples;
  size_t buckets = 0, shards = 0, pieces = 0;
  for (int it = 0; it < iterations; ++it) {
    Sample s;
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<zshard::plan::Plan> plan =
        zshard::plan::MakePlan(*model, options);
    const Clock::time_point t1 = Clock::now();
    if (!plan.ok()) {
      std::fprintf(stderr, "zshard-plan-bench: %s\n",
                   std::string(plan.status().message()).c_str());
      return 2;
    }
    shards = pieces = 0;
    for (int r = 0; r < plan->world; ++r) {
      zshard::plan::RankPlan rank =
          zshard::plan::MakeRankPlan(*model, *plan, r);
      shards += rank.shards.size();
      for (const auto& shard : rank.shards) pieces += shard.pieces.size();
    }
    const Clock::time_point t2 = Clock::now();
    buckets = 0;
    for (const auto& b : plan->buffers) buckets += b.buckets.size();
    s.plan_ms = Ms(t1 - t0);
    s.ranks_ms = Ms(t2 - t1);
    samples.push_back(s);
  }
  const auto [min, median] = MinAndMedian(samples);
  if (output == "json") {
    std::printf(
        "{\"preset\": \"%s\", \"world\": %d, \"instances\": %d, "
        "\"iterations\": %d, \"buckets\": %zu, \"shards\": %zu, "
        "\"pieces\": %zu, \"min_ms\": %.3f, \"median_ms\": %.3f, "
        "\"median_make_plan_ms\": %.3f, \"median_rank_plans_ms\": %.3f}\n",
        preset.c_str(), world, instances, iterations, buckets, shards, pieces,
        min.total_ms(), median.total_ms(), median.plan_ms, median.ranks_ms);
    return 0;
  }
  std::printf(
      "planner: %s  W=%d  I=%d  (%zu buckets, %zu shards, %zu pieces)\n"
      "  MakePlan + MakeRankPlan x %d ranks, %d iterations\n"
      "  min %.3f ms  median %.3f ms  (median MakePlan %.3f ms, rank plans "
      "%.3f ms)\n",
      preset.c_str(), world, instances, buckets, shards, pieces, world,
      iterations, min.total_ms(), median.total_ms(), median.plan_ms,
      median.ranks_ms);
  return 0;
}
