// Workloads through the engine: the regression MLP's loss goes down (every
// rank sees the same global loss), the synthetic formula's rank split sums
// to the whole batch, and telemetry counts the seed's traffic.
#include <cmath>
#include <vector>

#include "client/worker/engine/regression_workload.h"
#include "client/worker/engine/workload_factory.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

TEST(RegressionWorkloadTest, LossGoesDownAcrossFourRanksTwoInstances) {
  MlpShape shape;
  const plan::ModelSpec model = RegressionModelSpec(shape);
  plan::PlanOptions po;
  po.world = 4;
  po.instances = 2;
  po.layout.bucket_size = 512;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok()) << plan.status();
  testing::Cluster cluster;
  for (int r = 0; r < 4; ++r) {
    RegressionWorkload::Options o;
    o.shape = shape;
    o.global_batch = 32;
    o.world = 4;
    o.rank = r;
    cluster.workloads.push_back(std::make_unique<RegressionWorkload>(o));
  }
  job::OptimizerSpec opt;
  opt.lr = 1e-2;
  cluster.Create(model, *plan, opt);
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    std::vector<StepResult> results = cluster.Step();
    for (const StepResult& r : results) {
      ASSERT_TRUE(r.status.ok()) << r.status;
      ASSERT_TRUE(r.telemetry.has_loss);
      EXPECT_EQ(r.telemetry.loss, results[0].telemetry.loss);
    }
    losses.push_back(results[0].telemetry.loss);
  }
  EXPECT_GT(losses.front(), 0.1);
  EXPECT_LT(losses.back(), 0.5 * losses.front())
      << "first " << losses.front() << " last " << losses.back();
}

TEST(SyntheticWorkloadTest, RankSumsAddUpToTheBatch) {
  // Any split of the batch sums to the same global gradient (to fp32
  // rounding): the W-independence the elastic runs rely on.
  for (const int64_t i : {0, 17, 4095}) {
    const float whole = SyntheticWorkload::RankGradient(i, 3, 64, 1, 0);
    float split = 0;
    for (int r = 0; r < 4; ++r) {
      split += SyntheticWorkload::RankGradient(i, 3, 64, 4, r);
    }
    EXPECT_NEAR(split, whole, 1e-6);
    EXPECT_NE(SyntheticWorkload::RankGradient(i, 3, 64, 4, 0), 0.0f);
  }
  // Sample b = 0 alone at step 1: the formula itself.
  EXPECT_FLOAT_EQ(SyntheticWorkload::RankGradient(10, 1, 1, 1, 0),
                  static_cast<float>(0.01 * std::sin(0.01 + 0.37)));
}

TEST(StepTelemetryTest, TrafficIsTheSeedCountPlusInterInstanceSlice) {
  plan::ModelSpec model;
  model.name = "flat";
  plan::ParamSpec p;
  p.name = "w";
  p.shape = {3000};
  model.params.push_back(p);
  plan::PlanOptions po;
  po.world = 4;
  po.instances = 2;
  po.layout.bucket_size = 1024;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok());
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 4, 8);
  cluster.Create(model, *plan, job::OptimizerSpec{});
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  const std::vector<StepResult> results = cluster.Step();
  // D = 2: reduce-scatter + all-gather move 2 (D-1)/D of the padded
  // buffer; the inter-instance all-reduce 2 (I-1)/I of the owned half.
  const int64_t padded = plan->buffers[0].numel;
  const int64_t want = padded + padded / 2;
  for (const StepResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.telemetry.elements_sent, want);
    EXPECT_EQ(r.telemetry.elements_received, want);
    EXPECT_EQ(r.telemetry.bytes_sent, 2 * want);  // bf16
    EXPECT_GT(r.telemetry.times.step, 0);
    EXPECT_GT(r.telemetry.grad_norm, 0);
  }
}

TEST(WorkloadFactoryTest, BuildsTheJobsWorkloadOrSaysWhyNot) {
  job::JobSpec job;
  job.model = RegressionModelSpec(MlpShape{8, 16, 2});
  job.workload.kind = job::WorkloadKind::kRegression;
  job.workload.global_batch = 8;
  absl::StatusOr<std::unique_ptr<Workload>> w = MakeWorkload(job, 2, 1);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->has_loss());
  EXPECT_EQ((*w)->global_batch(), 8);

  job.model.params[3].shape = {5};
  w = MakeWorkload(job, 2, 1);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("fc2.bias"), std::string::npos);

  job.workload.kind = job::WorkloadKind::kSynthetic;
  w = MakeWorkload(job, 2, 1);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE((*w)->has_loss());
  EXPECT_FALSE(MakeWorkload(job, 2, 2).ok());
  job.workload.kind = job::WorkloadKind::kIdle;
  EXPECT_FALSE(MakeWorkload(job, 2, 0).ok());
}

TEST(WorkloadFactoryTest, JobDrivesARegressionRunEndToEnd) {
  job::JobSpec job;
  job.name = "demo";
  job.model = RegressionModelSpec(MlpShape{8, 16, 2});
  job.optimizer.lr = 1e-2;
  job.workload.kind = job::WorkloadKind::kRegression;
  job.workload.global_batch = 16;
  job.world.max = 2;
  job.layout.bucket_size = 128;
  absl::StatusOr<plan::Plan> plan =
      plan::MakePlan(job.model, job::JobPlanOptions(job, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::MemoryKvStore store;
  std::vector<double> first(2), last(2);
  testing::RunRanks(2, [&](int r) {
    absl::StatusOr<std::unique_ptr<Workload>> w = MakeWorkload(job, 2, r);
    ASSERT_TRUE(w.ok());
    EngineOptions options;
    options.adam_threads = 1;
    auto engine = StepEngine::Create(MakeEngineConfig(job, *plan, r, &store),
                                     options, **w);
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int s = 0; s < 20; ++s) {
      const StepResult result = (*engine)->Step(**w);
      ASSERT_TRUE(result.status.ok()) << result.status;
      (s == 0 ? first : last)[r] = result.telemetry.loss;
    }
  });
  EXPECT_EQ(first[0], first[1]);
  EXPECT_LT(last[0], first[0]);
}

}  // namespace
}  // namespace zshard::engine
