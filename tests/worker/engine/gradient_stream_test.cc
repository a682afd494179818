// Gradients handed over bucket by bucket (GradientStream): ranks as threads
// over Gloo on loopback, W = 4, I = 2, three buckets. Whatever order the
// buckets come in, and when a producer restarts after some windows were
// reduced, the params are bit-identical to those of the same steps with the
// gradients handed over whole; a discarded step is skipped on every rank.
#include "client/worker/engine/gradient_stream.h"

#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
constexpr int kSteps = 3;

// How a rank's streaming workload hands its buckets over.
enum class Mode {
  kAtTheEnd,      // none marked: all at once when Gradients returns
  kReverse,       // every bucket, last first
  kRestartAtTwo,  // step 2: bucket 0, then a restart once it is reduced
  kDiscardAtTwo,  // step 2: bucket 0, then the step is discarded
};

// The synthetic gradients, streamed as `mode` says.
class StreamingWorkload final : public Workload {
 public:
  StreamingWorkload(const plan::ModelSpec& model, int rank, Mode mode)
      : inner_(model, Options(rank)), mode_(mode) {}

  void InitialParam(int p, absl::Span<float> out) const override {
    inner_.InitialParam(p, out);
  }
  absl::StatusOr<double> Gradients(int64_t step, ModelState& state) override {
    return inner_.Gradients(step, state);
  }
  bool streams_gradients() const override { return true; }
  absl::StatusOr<double> StreamGradients(int64_t step, ModelState& state,
                                         GradientStream& stream) override {
    ZSHARD_ASSIGN_OR_RETURN(double loss, inner_.Gradients(step, state));
    auto& buffers = static_cast<EngineBuffers&>(state);
    const int buckets = static_cast<int>(buffers.windows().size());
    if (mode_ == Mode::kReverse) {
      for (int k = buckets - 1; k >= 0; --k) {
        ZSHARD_RETURN_IF_ERROR(stream.MarkReady(0, k));
      }
    }
    if (step == 2 &&
        (mode_ == Mode::kRestartAtTwo || mode_ == Mode::kDiscardAtTwo)) {
      ZSHARD_RETURN_IF_ERROR(stream.MarkReady(0, 0));
      if (mode_ == Mode::kDiscardAtTwo) {
        stream.Discard();
        return loss;
      }
      // The producer "dies" once window 0 is reduced: its replacement
      // zeroes the grads and writes them all again.
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(20);
      auto wait_reduced = [&](int n) {
        while (stream.reduced_windows() < n &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      };
      wait_reduced(1);
      restarted_with_ = stream.reduced_windows();
      ZSHARD_RETURN_IF_ERROR(stream.Restart());
      for (BufferState& b : buffers.buffers()) {
        ZSHARD_RETURN_IF_ERROR(
            buffers.device().Zero(b.grads.data(), b.grads.size()));
      }
      ZSHARD_RETURN_IF_ERROR(inner_.Gradients(step, state).status());
      // As a trainer does, every bucket is handed over again during the
      // replacement's backward, and the producer returns (Finish puts the
      // kept windows back) only after every window is reduced and the
      // reducer has had time for the all-reduce across instances, which
      // must wait for those windows.
      for (int k = buckets - 1; k >= 0; --k) {
        ZSHARD_RETURN_IF_ERROR(stream.MarkReady(0, k));
      }
      wait_reduced(buckets);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return loss;
  }
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return kBatch; }
  int restarted_with() const { return restarted_with_; }

 private:
  static SyntheticWorkload::Options Options(int rank) {
    SyntheticWorkload::Options o;
    o.global_batch = kBatch;
    o.world = kWorld;
    o.rank = rank;
    return o;
  }
  SyntheticWorkload inner_;
  const Mode mode_;
  int restarted_with_ = 0;
};

using testing::Training;

// `run` with the streaming workloads of `modes`, one per rank (none: the
// synthetic workloads, reduced after backward).
void Train(Training& run, const plan::ModelSpec& model, const plan::Plan& plan,
           const std::vector<Mode>& modes) {
  for (int r = 0; r < static_cast<int>(modes.size()); ++r) {
    run.cluster.workloads.push_back(
        std::make_unique<StreamingWorkload>(model, r, modes[r]));
  }
  testing::Train(run, model, plan, kBatch, kSteps);
}

class GradientStreamTest : public ::testing::TestWithParam<plan::DType> {
 protected:
  void SetUp() override {
    model_ = SmallModel(GetParam());
    plan::PlanOptions po;
    po.world = kWorld;
    po.instances = kInstances;
    po.layout.bucket_size = 600;
    absl::StatusOr<plan::Plan> plan = plan::MakePlan(model_, po);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->buffers.size(), 1u);
    ASSERT_GT(plan->buffers[0].buckets.size(), 2u);
    plan_ = *plan;
  }
  plan::ModelSpec model_;
  plan::Plan plan_;
};

TEST_P(GradientStreamTest, AnyOrderAndARestartGiveTheSameParamsBitForBit) {
  Training whole, streamed;
  Train(whole, model_, plan_, {});
  Train(streamed, model_, plan_,
        {Mode::kReverse, Mode::kRestartAtTwo, Mode::kAtTheEnd, Mode::kReverse});
  if (HasFatalFailure()) return;
  // The restart really kept a reduced window.
  EXPECT_GE(static_cast<StreamingWorkload&>(*streamed.cluster.workloads[1])
                .restarted_with(),
            1);
  for (int r = 0; r < kWorld; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(streamed.results[step][r].telemetry.outcome,
                StepOutcome::kApplied);
      EXPECT_EQ(streamed.results[step][r].telemetry.grad_norm,
                whole.results[step][r].telemetry.grad_norm);
    }
    EXPECT_EQ(
        zshard::testing::ReadParamBytes(streamed.cluster.engines[r]->buffers(),
                                        0),
        zshard::testing::ReadParamBytes(whole.cluster.engines[r]->buffers(), 0))
        << "rank " << r;
  }
}

TEST_P(GradientStreamTest, ADiscardedStepIsSkippedOnEveryRank) {
  Training run;
  Train(
      run, model_, plan_,
      {Mode::kReverse, Mode::kAtTheEnd, Mode::kDiscardAtTwo, Mode::kAtTheEnd});
  if (HasFatalFailure()) return;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(run.results[0][r].telemetry.outcome, StepOutcome::kApplied);
    EXPECT_EQ(run.results[1][r].telemetry.outcome, StepOutcome::kSkipped)
        << "rank " << r;
    EXPECT_EQ(run.results[2][r].telemetry.outcome, StepOutcome::kApplied);
    EXPECT_EQ(run.results[2][r].telemetry.adam_step, 2);
  }
}

TEST(GradientStreamUnitTest, UnknownBucketsAreRefusedAndCancelWakesTheReader) {
  const plan::ModelSpec model = SmallModel(plan::DType::kFp32);
  plan::PlanOptions po;
  po.layout.bucket_size = 600;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  ASSERT_TRUE(plan.ok()) << plan.status();
  SyntheticWorkload::Options o;
  SyntheticWorkload workload(model, o);
  absl::StatusOr<std::unique_ptr<EngineBuffers>> buffers =
      EngineBuffers::Create(model, *plan, 0, workload);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  GradientStream stream(buffers->get());
  EXPECT_EQ(stream.MarkReady(0, 99).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.MarkReady(1, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(stream.MarkReady(0, 0).ok());
  EXPECT_TRUE(stream.WaitReady(0).ok());
  stream.Done(0, true);
  EXPECT_EQ(stream.reduced_windows(), 1);
  std::thread reader([&] {
    EXPECT_EQ(stream.WaitReady(1).code(), absl::StatusCode::kCancelled);
  });
  stream.Cancel();
  reader.join();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GradientStreamTest,
                         ::testing::Values(plan::DType::kFp32,
                                           plan::DType::kBf16),
                         [](const auto& info) {
                           return std::string(plan::DTypeName(info.param));
                         });

}  // namespace
}  // namespace zshard::engine
