// overlap_param_gather in the engine: ranks as threads over Gloo on
// loopback, W = 4, I = 2, several buckets. A workload that defers the
// all-gather gets each step's StepFinished before any of its buckets is
// reported gathered, the buckets come in forward order (the last bucket of
// the reverse-registration buffer first), and the params are bit-identical
// to those of the same steps gathered before Step returns.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

using testing::SmallModel;

constexpr int kWorld = 4;
constexpr int kInstances = 2;
constexpr int64_t kBatch = 16;
constexpr int kSteps = 4;

// The synthetic gradients, with the all-gather deferred. As a trainer's
// forward does, the next step's gradients are computed only once every
// bucket of the last step was reported.
class DeferringWorkload final : public Workload {
 public:
  DeferringWorkload(const plan::ModelSpec& model, int rank)
      : inner_(model, Options(rank)) {}

  void InitialParam(int p, absl::Span<float> out) const override {
    inner_.InitialParam(p, out);
  }
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override {
    {
      absl::MutexLock lock(&mu_);
      auto all_in = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return gathered_ == expected_;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&all_in), absl::Seconds(20))) {
        return absl::DeadlineExceededError("the gathers never came");
      }
    }
    return inner_.Gradients(step, state);
  }
  void StepFinished(const StepReport& report) override {
    absl::MutexLock lock(&mu_);
    expected_ += report.deferred_gathers;
    events_.push_back(absl::StrCat("finished ", report.step, " deferring ",
                                   report.deferred_gathers));
  }
  bool defers_param_gather() const override { return true; }
  void ParamsGathered(int64_t step, int buffer, int bucket, bool ok) override {
    absl::MutexLock lock(&mu_);
    ++gathered_;
    events_.push_back(absl::StrCat("gathered ", step, " ", buffer, " ", bucket,
                                   ok ? "" : " failed"));
  }
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return kBatch; }

  // Waits for every reported bucket; the events so far.
  std::vector<std::string> Events() {
    absl::MutexLock lock(&mu_);
    auto all_in = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return gathered_ == expected_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&all_in), absl::Seconds(20));
    return events_;
  }

 private:
  static SyntheticWorkload::Options Options(int rank) {
    SyntheticWorkload::Options o;
    o.global_batch = kBatch;
    o.world = kWorld;
    o.rank = rank;
    return o;
  }
  SyntheticWorkload inner_;
  absl::Mutex mu_;
  int expected_ ABSL_GUARDED_BY(mu_) = 0;
  int gathered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

using testing::Training;

// `run` with the workloads that defer the all-gather, or (not `deferred`)
// the synthetic ones.
void Train(Training& run, const plan::ModelSpec& model, const plan::Plan& plan,
           bool deferred) {
  for (int r = 0; deferred && r < kWorld; ++r) {
    run.cluster.workloads.push_back(
        std::make_unique<DeferringWorkload>(model, r));
  }
  testing::Train(run, model, plan, kBatch, kSteps);
}

class ParamGatherTest : public ::testing::TestWithParam<plan::DType> {};

TEST_P(ParamGatherTest, DeferredGathersInForwardOrderGiveTheSameParams) {
  const plan::ModelSpec model = SmallModel(GetParam());
  plan::PlanOptions po;
  po.world = kWorld;
  po.instances = kInstances;
  po.layout.bucket_size = 600;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buffers.size(), 1u);
  const int buckets = static_cast<int>(plan->buffers[0].buckets.size());
  ASSERT_GT(buckets, 2);
  Training now, later;
  Train(now, model, *plan, false);
  Train(later, model, *plan, true);
  if (HasFatalFailure()) return;
  // Forward order: the buffer holds the params in reverse registration
  // order, so its last bucket holds p0 and comes first.
  std::vector<std::string> want;
  for (int step = 1; step <= kSteps; ++step) {
    want.push_back(absl::StrCat("finished ", step, " deferring ", buckets));
    for (int k = buckets - 1; k >= 0; --k) {
      want.push_back(absl::StrCat("gathered ", step, " 0 ", k));
    }
  }
  for (int r = 0; r < kWorld; ++r) {
    auto& w = static_cast<DeferringWorkload&>(*later.cluster.workloads[r]);
    EXPECT_EQ(w.Events(), want) << "rank " << r;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(later.results[step][r].telemetry.outcome,
                StepOutcome::kApplied);
      EXPECT_EQ(later.results[step][r].telemetry.grad_norm,
                now.results[step][r].telemetry.grad_norm);
    }
    EXPECT_EQ(
        zshard::testing::ReadParamBytes(later.cluster.engines[r]->buffers(), 0),
        zshard::testing::ReadParamBytes(now.cluster.engines[r]->buffers(), 0))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ParamGatherTest,
                         ::testing::Values(plan::DType::kFp32,
                                           plan::DType::kBf16));

}  // namespace
}  // namespace zshard::engine
