// The ZeRO-1 step with expert params against the unsharded reference, as
// step_engine_test does for dense ones: ranks as threads over loopback,
// the synthetic workload with expert_parallel E in {1, 2, 4}, D = 4 with
// I = 1 and 2, D = 8 with E = 4, D = 2 with E = 2 (expert shard groups of
// one rank), bf16 and fp32, with and without weight decay and clipping.
// Every rank's dumped masters (expert ones per expert-parallel rank) are
// compared with the reference, and every rank's params with the masters of
// its own expert-parallel rank. Also: the expert gradient's world
// independence, which the elastic runs rely on.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/engine_groups.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/workload_factory.h"
#include "common/job/workload_model.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/engine_cluster.h"
#include "tests/worker/engine/expert_model.h"

namespace zshard::engine {
namespace {

struct Case {
  int world;
  int instances;
  int experts;
  plan::DType dtype;
  double weight_decay;
  double clip;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "W=" << c.world << " I=" << c.instances << " E=" << c.experts << " "
      << plan::DTypeName(c.dtype) << " wd=" << c.weight_decay
      << " clip=" << c.clip;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat("W", c.world, "I", c.instances, "E", c.experts, "_",
                      plan::DTypeName(c.dtype), c.weight_decay > 0 ? "_wd" : "",
                      c.clip > 0 ? "_clip" : "");
}

class ExpertStepTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExpertStepTest, MastersMatchUnshardedReference) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  constexpr int64_t kBatch = 16;
  const plan::ModelSpec model = testing::ExpertModel(c.dtype);
  const plan::Plan plan =
      testing::ExpertPlan(model, c.world, c.instances, c.experts);
  ASSERT_EQ(plan.buffers.size(), 2u);
  for (const plan::Buffer& b : plan.buffers) {
    ASSERT_GT(b.buckets.size(), 1u);
    EXPECT_EQ(b.shard_group_size, b.key.expert
                                      ? plan.shard_group_size / c.experts
                                      : plan.shard_group_size);
  }

  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = c.weight_decay;
  opt.clip_grad_norm = c.clip;

  testing::Cluster cluster;
  cluster.workloads =
      testing::ExpertWorkloads(model, c.world, c.experts, kBatch);
  cluster.Create(model, plan, opt);
  for (int r = 0; r < c.world; ++r) {
    ASSERT_TRUE(cluster.create_status[r].ok()) << cluster.create_status[r];
  }
  ReferenceOptimizer::Options ro;
  ro.world = c.world;
  ro.instances = c.instances;
  ro.expert_parallel = c.experts;
  ro.optimizer = opt;
  std::unique_ptr<ReferenceOptimizer> reference =
      testing::ExpertReference(model, ro, kBatch);
  std::vector<Workload*> rank_workloads;
  for (auto& w : cluster.workloads) rank_workloads.push_back(w.get());

  for (int step = 1; step <= kSteps; ++step) {
    std::vector<StepResult> results = cluster.Step();
    absl::StatusOr<bool> applied = reference->Step(rank_workloads);
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(*applied);
    for (int r = 0; r < c.world; ++r) {
      ASSERT_TRUE(results[r].status.ok())
          << "rank " << r << ": " << results[r].status;
      EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kApplied);
      EXPECT_EQ(results[r].telemetry.adam_step, step);
      // The commit point counts every dense element once and every expert
      // element once per expert-parallel rank.
      EXPECT_NEAR(results[r].telemetry.grad_norm, reference->last_grad_norm(),
                  1e-5 * reference->last_grad_norm());
      EXPECT_EQ(results[r].commit_values, results[0].commit_values);
    }
    if (c.clip > 0) {
      ASSERT_GT(reference->last_grad_norm(), c.clip);
    }
  }

  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/expert_masters_",
                   CaseName(::testing::TestParamInfo<Case>(c, 0)));
  std::filesystem::remove_all(dir);
  for (int r = 0; r < c.world; ++r) {
    ASSERT_TRUE(DumpMasters(cluster.engines[r]->buffers(), dir).ok());
  }
  absl::StatusOr<std::map<std::string, std::vector<float>>> masters =
      LoadMasters(dir, model, c.experts);
  ASSERT_TRUE(masters.ok()) << masters.status();

  // The bound of step_engine_test: only the clip coefficient's fp32 norm
  // differs from the reference (kSteps x 4 ulps of the largest master, plus
  // one). Without clipping the norm does not enter: bit for bit.
  float max_abs = 0;
  for (size_t p = 0; p < model.params.size(); ++p) {
    for (float x : reference->master(p)) {
      max_abs = std::max(max_abs, std::fabs(x));
    }
  }
  const double tol =
      c.clip > 0 ? (kSteps * 4 + 1) * std::ldexp(max_abs, -23) : 0.0;
  double max_diff = 0;
  for (size_t p = 0; p < model.params.size(); ++p) {
    const plan::ParamSpec& spec = model.params[p];
    const std::vector<float>& got = masters->at(spec.name);
    const std::vector<float>& want = reference->master(p);
    ASSERT_EQ(got.size(), want.size()) << spec.name;
    ASSERT_EQ(got.size(), static_cast<size_t>(spec.numel() *
                                              (spec.expert ? c.experts : 1)));
    for (size_t j = 0; j < got.size(); ++j) {
      max_diff = std::max(max_diff, std::fabs(double{got[j]} - want[j]));
      ASSERT_NEAR(got[j], want[j], tol) << spec.name << "[" << j << "]";
    }
    // Every rank's all-gathered params are the masters of its own
    // expert-parallel rank, rounded.
    for (int r = 0; r < c.world; ++r) {
      const int e = StateExpertRank(model, plan, r, static_cast<int>(p));
      const std::vector<float> param =
          cluster.engines[r]->buffers().ReadParam(static_cast<int>(p));
      for (size_t j = 0; j < param.size(); ++j) {
        ASSERT_EQ(param[j], RoundTo(c.dtype, got[e * param.size() + j]))
            << "rank " << r << " " << spec.name << "[" << j << "]";
      }
    }
  }
  // The masters moved (about lr per step), expert ones too, and different
  // expert-parallel ranks hold different experts.
  const int64_t total = model.numel();
  double moved_dense = 0, moved_expert = 0;
  for (int64_t j = 0; j < 300; ++j) {  // d1 starts at global element 1700
    moved_dense = std::max<double>(
        moved_dense, std::fabs(masters->at("d1")[j] -
                               SyntheticWorkload::InitialValue(1700 + j)));
  }
  const std::vector<float>& x1 = masters->at("x1");
  for (int e = 0; e < c.experts; ++e) {
    for (int64_t j = 0; j < 1500; ++j) {  // x1 starts at 2000
      moved_expert = std::max<double>(
          moved_expert,
          std::fabs(x1[e * 1500 + j] -
                    SyntheticWorkload::InitialValue(2000 + e * total + j)));
    }
  }
  EXPECT_GT(moved_dense, 2e-3);
  EXPECT_GT(moved_expert, 2e-3);
  if (c.experts > 1) {
    EXPECT_NE(x1[0], x1[1500]);
  }
  RecordProperty("max_abs_diff", absl::StrCat(max_diff));
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, ExpertStepTest,
    ::testing::Values(Case{4, 1, 1, plan::DType::kBf16, 0.0, 0.0},
                      Case{4, 1, 2, plan::DType::kBf16, 0.1, 0.0},
                      Case{4, 1, 2, plan::DType::kBf16, 0.1, 0.05},
                      Case{4, 1, 4, plan::DType::kBf16, 0.0, 0.05},
                      Case{4, 1, 2, plan::DType::kFp32, 0.1, 0.05},
                      Case{8, 2, 1, plan::DType::kBf16, 0.1, 0.0},
                      Case{8, 2, 2, plan::DType::kBf16, 0.1, 0.05},
                      Case{8, 2, 4, plan::DType::kBf16, 0.0, 0.0},
                      Case{8, 2, 2, plan::DType::kFp32, 0.0, 0.0},
                      Case{8, 1, 4, plan::DType::kBf16, 0.1, 0.0},
                      Case{8, 1, 4, plan::DType::kFp32, 0.0, 0.05},
                      Case{4, 2, 2, plan::DType::kBf16, 0.1, 0.05},
                      Case{2, 1, 2, plan::DType::kBf16, 0.0, 0.0}),
    CaseName);

// The ranks holding expert-parallel rank e's experts (r % E == e) cover
// every sample once: their sums add up to the whole batch's whatever W.
TEST(ExpertWorkloadTest, ExpertRankSumsAddUpToTheBatch) {
  for (const int64_t i : {0, 17, 4095}) {
    const float whole = SyntheticWorkload::RankGradient(i, 3, 64, 1, 0);
    for (auto [world, experts] :
         {std::pair{2, 2}, std::pair{4, 2}, std::pair{8, 2}, std::pair{4, 4},
          std::pair{8, 4}, std::pair{12, 4}}) {
      for (int e = 0; e < experts; ++e) {
        float split = 0;
        for (int r = e; r < world; r += experts) {
          split += SyntheticWorkload::ExpertRankGradient(i, 3, 64, world,
                                                         experts, r);
        }
        EXPECT_NEAR(split, whole, 1e-6)
            << "W=" << world << " E=" << experts << " e=" << e;
      }
    }
    // E = 1: the dense formula, bit for bit.
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(SyntheticWorkload::ExpertRankGradient(i, 3, 64, 4, 1, r),
                SyntheticWorkload::RankGradient(i, 3, 64, 4, r));
    }
  }
  // Rank 1 of W = 4, E = 2 sums the samples of its group {0, 1}: b % 4 in
  // {0, 1}.
  float want = 0;
  for (int64_t b : {0, 1, 4, 5}) {
    want +=
        static_cast<float>(0.01 * std::sin(0.001 * 10 + 0.37 * 2 + 0.11 * b));
  }
  EXPECT_EQ(SyntheticWorkload::ExpertRankGradient(10, 2, 8, 4, 2, 1), want);
}

TEST(ExpertWorkloadTest, ExpertRanksStartFromDifferentValues) {
  const plan::ModelSpec model = testing::ExpertModel();
  const int64_t total = model.numel();
  auto workloads = testing::ExpertWorkloads(model, 4, 2, 8);
  std::vector<float> dense0(1000), dense1(1000), x0_e0(700), x0_e1(700);
  workloads[0]->InitialParam(0, absl::MakeSpan(dense0));
  workloads[1]->InitialParam(0, absl::MakeSpan(dense1));
  workloads[2]->InitialParam(1, absl::MakeSpan(x0_e0));
  workloads[3]->InitialParam(1, absl::MakeSpan(x0_e1));
  EXPECT_EQ(dense0, dense1);
  // x0 starts at global element 1000; expert rank e adds e * P.
  EXPECT_EQ(x0_e0[5], SyntheticWorkload::InitialValue(1005));
  EXPECT_EQ(x0_e1[5], SyntheticWorkload::InitialValue(1005 + total));
  EXPECT_NE(x0_e0, x0_e1);
}

// The job's expert_parallel reaches the synthetic workload (rank 1 of
// E = 2 holds other experts than rank 0); what no workload can train is
// refused with one line.
TEST(ExpertWorkloadTest, FactoryPassesExpertParallelAndRefusesTheRest) {
  job::JobSpec job;
  job.model = testing::ExpertModel();
  job.layout.expert_parallel = 2;
  job.workload.kind = job::WorkloadKind::kSynthetic;
  job.workload.global_batch = 8;
  absl::StatusOr<std::unique_ptr<Workload>> r0 = MakeWorkload(job, 4, 0);
  absl::StatusOr<std::unique_ptr<Workload>> r1 = MakeWorkload(job, 4, 1);
  ASSERT_TRUE(r0.ok() && r1.ok());
  std::vector<float> a(700), b(700);
  (*r0)->InitialParam(1, absl::MakeSpan(a));
  (*r1)->InitialParam(1, absl::MakeSpan(b));
  EXPECT_EQ(a[0], SyntheticWorkload::InitialValue(1000));
  EXPECT_EQ(b[0], SyntheticWorkload::InitialValue(1000 + job.model.numel()));
  absl::Status odd = MakeWorkload(job, 3, 0).status();
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("expert_parallel"), absl::string_view::npos);

  job::MlpShape shape;
  job.model = job::RegressionModelSpec(shape);
  job.workload.kind = job::WorkloadKind::kRegression;
  EXPECT_TRUE(MakeWorkload(job, 4, 0).ok());
  job.model.params[2].expert = true;
  absl::Status moe = MakeWorkload(job, 4, 0).status();
  EXPECT_EQ(moe.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(moe.message().find("fc2.weight"), absl::string_view::npos) << moe;
  job.layout.expert_parallel = 1;
  EXPECT_TRUE(MakeWorkload(job, 4, 0).ok());
}

// With gradients reduced in fp32 the reference of a given E does not
// depend on W or I beyond fp32 summation order.
TEST(ExpertReferenceTest, Fp32ReductionMakesTheReferenceWorldIndependent) {
  constexpr int kSteps = 20;
  constexpr int64_t kBatch = 16;
  const plan::ModelSpec model = testing::ExpertModel();
  auto run = [&](int world, int instances) {
    ReferenceOptimizer::Options ro;
    ro.world = world;
    ro.instances = instances;
    ro.expert_parallel = 2;
    ro.grad_reduce_in_fp32 = true;
    ro.optimizer.lr = 1e-3;
    auto reference = testing::ExpertReference(model, ro, kBatch);
    auto workloads = testing::ExpertWorkloads(model, world, 2, kBatch);
    std::vector<Workload*> ptrs;
    for (auto& w : workloads) ptrs.push_back(w.get());
    for (int s = 0; s < kSteps; ++s) {
      absl::StatusOr<bool> applied = reference->Step(ptrs);
      EXPECT_TRUE(applied.ok() && *applied) << applied.status();
    }
    std::vector<std::vector<float>> out;
    for (size_t p = 0; p < model.params.size(); ++p) {
      out.push_back(reference->master(static_cast<int>(p)));
    }
    return out;
  };
  const auto base = run(4, 1);
  float max_abs = 0;
  for (const auto& v : base) {
    for (float x : v) max_abs = std::max(max_abs, std::fabs(x));
  }
  const double tol = (kSteps * 4 + 1) * std::ldexp(max_abs, -23) / 4;
  for (auto [world, instances] :
       {std::pair{2, 1}, std::pair{8, 1}, std::pair{4, 2}, std::pair{8, 2}}) {
    const auto other = run(world, instances);
    double diff = 0;
    for (size_t p = 0; p < base.size(); ++p) {
      ASSERT_EQ(base[p].size(), other[p].size());
      for (size_t j = 0; j < base[p].size(); ++j) {
        diff = std::max(diff, std::fabs(double{base[p][j]} - other[p][j]));
      }
    }
    EXPECT_LE(diff, tol) << "W=" << world << " I=" << instances;
  }
}

}  // namespace
}  // namespace zshard::engine
