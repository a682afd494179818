// Faults in the step: a non-finite gradient on one rank skips the step on
// every rank without touching state; a peer aborting before the commit
// point leaves every survivor's optimizer state and params byte-identical.
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/reference_optimizer.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

plan::ModelSpec TinyModel() {
  plan::ModelSpec spec;
  spec.name = "tiny";
  for (int i = 0; i < 3; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("w", i);
    p.shape = {300 + 200 * i};
    spec.params.push_back(p);
  }
  return spec;
}

plan::Plan TinyPlan(const plan::ModelSpec& model, int world, int instances) {
  plan::PlanOptions po;
  po.world = world;
  po.instances = instances;
  po.layout.bucket_size = 400;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Every byte of a rank's params, masters, m and v.
std::vector<uint8_t> Snapshot(const EngineBuffers& b) {
  std::vector<uint8_t> out;
  auto append = [&](const void* p, size_t n) {
    const uint8_t* u = static_cast<const uint8_t*>(p);
    out.insert(out.end(), u, u + n);
  };
  for (size_t buf = 0; buf < b.buffers().size(); ++buf) {
    const std::vector<uint8_t> params =
        zshard::testing::ReadParamBytes(b, static_cast<int>(buf));
    append(params.data(), params.size());
  }
  for (size_t w = 0; w < b.windows().size(); ++w) {
    for (const StateArray a :
         {StateArray::kMaster, StateArray::kExpAvg, StateArray::kExpAvgSq}) {
      const std::vector<float> v =
          zshard::testing::ReadArray(b, a, static_cast<int>(w));
      append(v.data(), v.size() * sizeof(float));
    }
  }
  return out;
}

// Synthetic gradients, with one NaN element at a chosen step.
class PoisonedWorkload final : public Workload {
 public:
  PoisonedWorkload(std::unique_ptr<Workload> inner, int64_t poison_step)
      : inner_(std::move(inner)), poison_step_(poison_step) {}
  void InitialParam(int p, absl::Span<float> out) const override {
    inner_->InitialParam(p, out);
  }
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override {
    absl::StatusOr<double> loss = inner_->Gradients(step, state);
    if (step == poison_step_) {
      std::vector<float> g(500, 0.0f);
      g[123] = std::numeric_limits<float>::quiet_NaN();
      ZSHARD_RETURN_IF_ERROR(state.WriteGrad(1, g));
    }
    return loss;
  }
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return inner_->global_batch(); }

 private:
  std::unique_ptr<Workload> inner_;
  const int64_t poison_step_;
};

TEST(StepEngineFaultsTest, NonFiniteGradientSkipsTheStepEverywhere) {
  const plan::ModelSpec model = TinyModel();
  const plan::Plan plan = TinyPlan(model, 4, 2);
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 4, 8);
  cluster.workloads[3] =
      std::make_unique<PoisonedWorkload>(std::move(cluster.workloads[3]), 2);
  cluster.Create(model, plan, job::OptimizerSpec{});
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;

  for (const StepResult& r : cluster.Step()) ASSERT_TRUE(r.status.ok());
  std::vector<std::vector<uint8_t>> before;
  for (auto& e : cluster.engines) before.push_back(Snapshot(e->buffers()));

  std::vector<StepResult> results = cluster.Step();
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(results[r].status.ok()) << results[r].status;
    EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kSkipped);
    EXPECT_EQ(results[r].telemetry.nonfinite, 1);
    EXPECT_EQ(results[r].telemetry.skipped_steps, 1);
    EXPECT_EQ(cluster.engines[r]->adam_step(), 1);
    EXPECT_EQ(Snapshot(cluster.engines[r]->buffers()), before[r])
        << "rank " << r;
  }
  // The next step applies again, as Adam step 2.
  results = cluster.Step();
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(results[r].status.ok());
    EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kApplied);
    EXPECT_EQ(results[r].telemetry.adam_step, 2);
    EXPECT_EQ(results[r].telemetry.step, 3);
    EXPECT_NE(Snapshot(cluster.engines[r]->buffers()), before[r]);
  }
}

TEST(StepEngineFaultsTest, PeerAbortBeforeCommitLeavesSurvivorsUnchanged) {
  const plan::ModelSpec model = TinyModel();
  const plan::Plan plan = TinyPlan(model, 4, 2);
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 4, 8);
  cluster.Create(model, plan, job::OptimizerSpec{}, /*timeout_ms=*/5000);
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  for (const StepResult& r : cluster.Step()) ASSERT_TRUE(r.status.ok());

  std::vector<std::vector<uint8_t>> before;
  for (auto& e : cluster.engines) before.push_back(Snapshot(e->buffers()));
  // Rank 3 dies before joining step 2's first collective.
  constexpr int kDead = 3;
  std::vector<StepResult> results(4);
  testing::RunRanks(4, [&](int r) {
    if (r == kDead) {
      cluster.engines[r]->Abort();
      return;
    }
    results[r] = cluster.engines[r]->Step(*cluster.workloads[r]);
  });
  for (int r = 0; r < 4; ++r) {
    if (r == kDead) continue;
    EXPECT_FALSE(results[r].status.ok()) << "rank " << r;
    EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kFailedBeforeCommit)
        << "rank " << r << ": " << results[r].status;
    EXPECT_EQ(cluster.engines[r]->adam_step(), 1);
    EXPECT_EQ(cluster.engines[r]->step(), 1);
    EXPECT_EQ(Snapshot(cluster.engines[r]->buffers()), before[r])
        << "rank " << r;
  }
}

// The rank that loses its connections after the commit point.
constexpr int kLost = 3;

TEST(StepEngineFaultsTest, PeerLostAfterCommitStillAdvancesEveryRank) {
  const plan::ModelSpec model = TinyModel();
  const plan::Plan plan = TinyPlan(model, 4, 1);
  std::atomic<bool> kill{false};
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 4, 8);
  // Rank 3 loses its connections right after step 2's commit point.
  cluster.Create(model, plan, job::OptimizerSpec{}, /*timeout_ms=*/5000,
                 [&](int rank, EngineOptions& options) {
                   if (rank != kLost) return;
                   options.after_commit = [&cluster, &kill] {
                     if (kill) cluster.engines[kLost]->Abort();
                   };
                 });
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  ReferenceOptimizer::Options ro;
  ro.world = 4;
  ReferenceOptimizer reference(model, ro, *cluster.workloads[0]);
  std::vector<Workload*> rank_workloads;
  for (auto& w : cluster.workloads) rank_workloads.push_back(w.get());
  for (const StepResult& r : cluster.Step()) ASSERT_TRUE(r.status.ok());
  ASSERT_TRUE(reference.Step(rank_workloads).ok());

  kill = true;
  const std::vector<StepResult> results = cluster.Step();
  ASSERT_TRUE(reference.Step(rank_workloads).ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(results[r].status.ok()) << "rank " << r;
    EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kFailedAfterCommit)
        << "rank " << r << ": " << results[r].status;
    EXPECT_EQ(cluster.engines[r]->adam_step(), 2);
    // The owned masters reached step 2 exactly as the reference did.
    const EngineBuffers& b = cluster.engines[r]->buffers();
    for (size_t w = 0; w < b.windows().size(); ++w) {
      const std::vector<float> master = zshard::testing::ReadArray(
          b, StateArray::kMaster, static_cast<int>(w));
      for (const plan::Piece& piece : b.windows()[w].pieces) {
        for (int64_t j = piece.start; j < piece.end; ++j) {
          ASSERT_EQ(
              master[j - b.windows()[w].start],
              reference.master(
                  piece.param_index)[piece.param_start + j - piece.start]);
        }
      }
    }
  }
}

TEST(StepEngineFaultsTest, CreateRejectsMissingStore) {
  const plan::ModelSpec model = TinyModel();
  const plan::Plan plan = TinyPlan(model, 2, 1);
  EngineConfig config;
  config.model = model;
  config.plan = plan;
  config.rank = 0;
  SyntheticWorkload workload(model, {});
  absl::StatusOr<std::unique_ptr<StepEngine>> engine =
      StepEngine::Create(config, EngineOptions{}, workload);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  config.rank = 2;
  engine = StepEngine::Create(config, EngineOptions{}, workload);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zshard::engine
