// The ZeRO-1 step against the unsharded reference: ranks as threads over
// Gloo on loopback, the synthetic workload, several buckets with padding,
// W in {1, 2, 4}, I in {1, 2}, bf16 and fp32 params, with and without
// weight decay and clipping; every rank's dumped masters are gathered and
// compared with the reference, and every rank's params with the masters.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/reference_optimizer.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

using testing::SmallModel;

struct Case {
  int world;
  int instances;
  plan::DType dtype;
  double weight_decay;
  double clip;
  // A cosine schedule with one warmup step (job::LrSchedule) instead of a
  // constant rate.
  bool cosine = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "W=" << c.world << " I=" << c.instances << " "
      << plan::DTypeName(c.dtype) << " wd=" << c.weight_decay
      << " clip=" << c.clip << (c.cosine ? " cosine" : "");
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat("W", c.world, "I", c.instances, "_",
                      plan::DTypeName(c.dtype), c.weight_decay > 0 ? "_wd" : "",
                      c.clip > 0 ? "_clip" : "", c.cosine ? "_cosine" : "");
}

class StepEngineTest : public ::testing::TestWithParam<Case> {};

TEST_P(StepEngineTest, MastersMatchUnshardedReference) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  constexpr int64_t kBatch = 16;
  const plan::ModelSpec model = SmallModel(c.dtype, 3);
  plan::PlanOptions po;
  po.world = c.world;
  po.instances = c.instances;
  po.layout.bucket_size = 600;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->buffers[0].buckets.size(), 2u);

  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = c.weight_decay;
  // The synthetic batch-mean gradient's norm is about 0.3 here: 0.05 clips.
  opt.clip_grad_norm = c.clip;
  if (c.cosine) {
    opt.lr_schedule.kind = job::LrScheduleKind::kCosine;
    opt.lr_schedule.warmup_steps = 1;
    opt.lr_schedule.decay_steps = kSteps;
    opt.lr_schedule.min_lr = 1e-4;
  }

  testing::Cluster cluster;
  cluster.MakeSynthetic(model, c.world, kBatch);
  cluster.Create(model, *plan, opt);
  for (int r = 0; r < c.world; ++r) {
    ASSERT_TRUE(cluster.create_status[r].ok()) << cluster.create_status[r];
  }
  ReferenceOptimizer::Options ro;
  ro.world = c.world;
  ro.instances = c.instances;
  ro.optimizer = opt;
  ReferenceOptimizer reference(model, ro, *cluster.workloads[0]);
  std::vector<Workload*> rank_workloads;
  for (auto& w : cluster.workloads) rank_workloads.push_back(w.get());

  for (int step = 1; step <= kSteps; ++step) {
    std::vector<StepResult> results = cluster.Step();
    absl::StatusOr<bool> applied = reference.Step(rank_workloads);
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(*applied);
    for (int r = 0; r < c.world; ++r) {
      ASSERT_TRUE(results[r].status.ok())
          << "rank " << r << ": " << results[r].status;
      EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kApplied);
      EXPECT_EQ(results[r].telemetry.adam_step, step);
      EXPECT_EQ(results[r].telemetry.lr,
                job::LearningRate(opt.lr_schedule, opt.lr, step));
      EXPECT_NEAR(results[r].telemetry.grad_norm, reference.last_grad_norm(),
                  1e-5 * reference.last_grad_norm());
    }
    if (c.clip > 0) {
      ASSERT_GT(reference.last_grad_norm(), c.clip);
    }
  }

  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/masters_",
                   CaseName(::testing::TestParamInfo<Case>(c, 0)));
  std::filesystem::remove_all(dir);
  for (int r = 0; r < c.world; ++r) {
    ASSERT_TRUE(DumpMasters(cluster.engines[r]->buffers(), dir).ok());
  }
  absl::StatusOr<std::map<std::string, std::vector<float>>> masters =
      LoadMasters(dir, model);
  ASSERT_TRUE(masters.ok()) << masters.status();

  // Tolerance: the engine reproduces the reference's gradient rounding
  // exactly (rank-order fp32 sums, one rounding per collective), so what
  // remains is the global norm, summed in fp32 across ranks instead of in
  // double. It only enters the clip coefficient, a relative error of a few
  // fp32 ulps in the gradient scale; Adam's update m/sqrt(v) is invariant to
  // that scale up to eps, so each step moves a master by at most a few ulps
  // of its value. Bound: kSteps x 4 ulps of the largest master, plus one ulp.
  float max_abs = 0;
  for (size_t p = 0; p < model.params.size(); ++p) {
    for (float x : reference.master(p))
      max_abs = std::max(max_abs, std::fabs(x));
  }
  const double tol = (kSteps * 4 + 1) * std::ldexp(max_abs, -23);
  double max_diff = 0;
  for (size_t p = 0; p < model.params.size(); ++p) {
    const std::vector<float>& got = masters->at(model.params[p].name);
    const std::vector<float>& want = reference.master(p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < got.size(); ++j) {
      max_diff = std::max(max_diff, std::fabs(double{got[j]} - want[j]));
      ASSERT_NEAR(got[j], want[j], tol)
          << model.params[p].name << "[" << j << "]";
    }
    // Every rank's all-gathered params are the masters rounded.
    for (int r = 0; r < c.world; ++r) {
      const std::vector<float> param = zshard::testing::Param(
          cluster.engines[r]->buffers(), static_cast<int>(p));
      for (size_t j = 0; j < param.size(); ++j) {
        ASSERT_EQ(param[j], RoundTo(c.dtype, got[j]))
            << "rank " << r << " " << model.params[p].name << "[" << j << "]";
      }
    }
  }
  // The masters moved: three steps of about lr each.
  EXPECT_GT(
      std::fabs(masters->at("p2")[0] - SyntheticWorkload::InitialValue(1300)),
      1e-3);
  RecordProperty("max_abs_diff", absl::StrCat(max_diff));
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, StepEngineTest,
    ::testing::Values(Case{1, 1, plan::DType::kBf16, 0.0, 0.0},
                      Case{2, 1, plan::DType::kBf16, 0.1, 0.0},
                      Case{2, 2, plan::DType::kFp32, 0.0, 0.05},
                      Case{4, 1, plan::DType::kBf16, 0.0, 0.0},
                      Case{4, 1, plan::DType::kBf16, 0.1, 0.05},
                      Case{4, 1, plan::DType::kFp32, 0.1, 0.0},
                      Case{4, 2, plan::DType::kBf16, 0.0, 0.0},
                      Case{4, 2, plan::DType::kBf16, 0.1, 0.05},
                      Case{4, 2, plan::DType::kFp32, 0.0, 0.05},
                      Case{4, 2, plan::DType::kFp32, 0.1, 0.0},
                      Case{1, 1, plan::DType::kFp32, 0.1, 0.0, true},
                      Case{4, 2, plan::DType::kBf16, 0.1, 0.05, true}),
    CaseName);

}  // namespace
}  // namespace zshard::engine
