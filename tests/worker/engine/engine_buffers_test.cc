// EngineBuffers: byte accounting equals the ledger's ZeRO-1 figures for
// every rank (bf16 and fp32 params, I = 1 and 2), windows and initial
// values follow the plan, and the per-step traffic is the seed's count.
#include "client/worker/engine/engine_buffers.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/synthetic_workload.h"
#include "common/plan/ledger.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"

namespace zshard::engine {
namespace {

plan::ModelSpec MixedModel() {
  plan::ModelSpec spec;
  spec.name = "mixed";
  const int64_t sizes[] = {1000, 300, 5000, 7, 2100};
  for (int i = 0; i < 5; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("p", i);
    p.shape = {sizes[i]};
    p.dtype = i == 4 ? plan::DType::kFp32 : plan::DType::kBf16;
    spec.params.push_back(p);
  }
  return spec;
}

TEST(EngineBuffersTest, MemoryEqualsLedgerZero1Bytes) {
  const plan::ModelSpec model = MixedModel();
  for (const int instances : {1, 2}) {
    for (const bool fp32_grads : {false, true}) {
      plan::PlanOptions po;
      po.world = 4;
      po.instances = instances;
      po.layout.bucket_size = 4000;
      po.layout.grad_reduce_in_fp32 = fp32_grads;
      absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
      ASSERT_TRUE(plan.ok()) << plan.status();
      SyntheticWorkload workload(model, {});
      for (int rank = 0; rank < 4; ++rank) {
        absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
            EngineBuffers::Create(model, *plan, rank, workload);
        ASSERT_TRUE(b.ok()) << b.status();
        const MemoryBytes got = (*b)->memory();
        const plan::StageBytes want =
            plan::RankStageBytes(model, *plan, rank, plan::Stage::kZero1);
        EXPECT_EQ(got.param, want.param_bytes) << "rank " << rank;
        EXPECT_EQ(got.grad, want.grad_bytes) << "rank " << rank;
        EXPECT_EQ(got.master, want.master_bytes) << "rank " << rank;
        EXPECT_EQ(got.exp_avg, want.exp_avg_bytes) << "rank " << rank;
        EXPECT_EQ(got.exp_avg_sq, want.exp_avg_sq_bytes) << "rank " << rank;
        EXPECT_EQ(got.comm, 0);
        EXPECT_EQ(got.total(), want.total_bytes) << "rank " << rank;
        // Not a tautology: fp32 params hold no master, bf16 ones do.
        EXPECT_GT(got.master, 0);
        EXPECT_LT(got.master, got.exp_avg);
      }
    }
  }
}

TEST(EngineBuffersTest, InitialParamsAndMastersAreRoundedFormula) {
  const plan::ModelSpec model = MixedModel();
  plan::PlanOptions po;
  po.world = 2;
  po.layout.bucket_size = 4000;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok());
  SyntheticWorkload workload(model, {});
  absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
      EngineBuffers::Create(model, *plan, 1, workload);
  ASSERT_TRUE(b.ok()) << b.status();
  // p1 starts at global element 1000; bf16 rounding of 0.02 cos(0.7).
  const std::vector<float> p1 = zshard::testing::Param(**b, 1);
  const float exact = SyntheticWorkload::InitialValue(1000);
  EXPECT_NE(p1[0], exact);
  EXPECT_NEAR(p1[0], exact, exact * (1.0 / 256));
  // Each master equals the param element it shadows; padding is 0.
  for (size_t w = 0; w < (*b)->windows().size(); ++w) {
    const WindowState& win = (*b)->windows()[w];
    const std::vector<float> master = zshard::testing::ReadArray(
        **b, StateArray::kMaster, static_cast<int>(w));
    for (const plan::Piece& piece : win.pieces) {
      const std::vector<float> param =
          zshard::testing::Param(**b, piece.param_index);
      for (int64_t j = piece.start; j < piece.end; ++j) {
        ASSERT_EQ(master[j - win.start],
                  param[piece.param_start + (j - piece.start)]);
      }
    }
  }
}

TEST(EngineBuffersTest, ParamsLargerThanOneStagingCopyRoundTrip) {
  // More elements than one staging copy converts (2^20): several copies.
  plan::ModelSpec model;
  model.name = "large";
  plan::ParamSpec p;
  p.name = "w";
  p.shape = {(int64_t{1} << 21) + 3};
  model.params.push_back(p);
  plan::PlanOptions po;
  po.world = 1;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok());
  SyntheticWorkload workload(model, {});
  absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
      EngineBuffers::Create(model, *plan, 0, workload);
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t n = p.numel();
  const std::vector<float> param = zshard::testing::Param(**b, 0);
  ASSERT_EQ(static_cast<int64_t>(param.size()), n);
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(param[j],
              RoundTo(plan::DType::kBf16, SyntheticWorkload::InitialValue(j)))
        << j;
  }
  const std::vector<float> master =
      zshard::testing::ReadArray(**b, StateArray::kMaster, 0);
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(master[j], param[j]) << j;
  std::vector<float> grad(n);
  for (int64_t j = 0; j < n; ++j) grad[j] = static_cast<float>(j) * 1e-7f;
  ASSERT_TRUE((*b)->WriteGrad(0, grad).ok());
  const device::Buffer& grads = (*b)->buffers()[0].grads;
  std::vector<uint8_t> bytes(grads.size());
  ASSERT_TRUE(
      (*b)->device().CopyToHost(bytes.data(), grads.data(), grads.size()).ok());
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(LoadElement(plan::DType::kBf16, bytes.data(), j),
              RoundTo(plan::DType::kBf16, grad[j]))
        << j;
  }
  // The staging copies are host memory outside the ledger's total.
  EXPECT_GT((*b)->device().memory().staging, 0);
  EXPECT_EQ((*b)->memory().total(), (*b)->device().memory().total());
}

TEST(EngineBuffersTest, RejectsBadRank) {
  plan::ModelSpec model = MixedModel();
  plan::PlanOptions po;
  po.world = 2;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok());
  SyntheticWorkload workload(model, {});
  EXPECT_EQ(EngineBuffers::Create(model, *plan, 2, workload).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineBuffers::Create(model, *plan, -1, workload).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineBuffersTest, BuffersLargerThanMemoryAreResourceExhausted) {
  // 10^12 bf16 params need 4 TB of param and grad buffers alone, more
  // than any machine these tests run on.
  plan::ModelSpec model;
  model.name = "huge";
  plan::ParamSpec p;
  p.name = "w";
  p.shape = {1'000'000'000'000};
  model.params.push_back(p);
  plan::PlanOptions po;
  po.world = 2;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok()) << plan.status();
  SyntheticWorkload workload(model, {});
  absl::Status status =
      EngineBuffers::Create(model, *plan, 0, workload).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("GiB"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace zshard::engine
