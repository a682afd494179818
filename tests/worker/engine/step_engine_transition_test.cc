// The step engine's part in a transition: the stop flag carried by the
// commit all-reduce, a step left pending at the commit point and finished
// later with a peer's commit values (exactly the undisturbed state), and
// an engine created from state moved to another world, which continues to
// the masters of an undisturbed run.
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/engine/reference_optimizer.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

plan::ModelSpec Model(plan::DType dtype) {
  plan::ModelSpec spec;
  spec.name = "transition";
  const int64_t sizes[] = {900, 300, 1700, 7, 450};
  for (int i = 0; i < 5; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("w", i);
    p.shape = {sizes[i]};
    p.dtype = dtype;
    p.no_weight_decay = (i == 3);
    spec.params.push_back(p);
  }
  return spec;
}

plan::Plan MakeTestPlan(const plan::ModelSpec& model, int world,
                        int instances) {
  plan::PlanOptions po;
  po.world = world;
  po.instances = instances;
  po.layout.bucket_size = 500;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

job::OptimizerSpec Optimizer() {
  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = 0.1;
  opt.clip_grad_norm = 0.05;  // the batch-mean norm is about 0.3: clips
  return opt;
}

// The bytes of every owned master, m and v of a rank.
std::vector<uint8_t> OwnedState(const EngineBuffers& b) {
  std::vector<uint8_t> out;
  auto append = [&](const void* p, size_t n) {
    const uint8_t* u = static_cast<const uint8_t*>(p);
    out.insert(out.end(), u, u + n);
  };
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

TEST(StepEngineStopTest, OneRanksRequestStopsEveryRankAtTheSameStep) {
  const plan::ModelSpec model = Model(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 4, 2);
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 4, 8);
  cluster.Create(model, plan, Optimizer());
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  for (int step = 1; step <= 3; ++step) {
    // Step 2: only rank 3 (instance 1) asks to stop.
    std::vector<StepResult> results(4);
    testing::RunRanks(4, [&](int r) {
      results[r] =
          cluster.engines[r]->Step(*cluster.workloads[r],
                                   /*stop_requested=*/step == 2 && r == 3);
    });
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(results[r].status.ok()) << results[r].status;
      EXPECT_EQ(results[r].stop, step == 2) << "rank " << r << " step " << step;
      EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kApplied);
      EXPECT_FALSE(results[r].commit_pending);
      EXPECT_EQ(results[r].commit_values.size(), 4u);
      EXPECT_EQ(results[r].commit_values, results[0].commit_values);
    }
  }
}

// Rank kPending's commit all-reduce fails after its peers got the values.
constexpr int kPending = 2;

TEST(StepEngineCommitPendingTest, FinishingGivesTheUndisturbedState) {
  const plan::ModelSpec model = Model(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 4, 1);
  std::atomic<bool> fail{false};
  testing::Cluster cluster, undisturbed;
  cluster.MakeSynthetic(model, 4, 8);
  undisturbed.MakeSynthetic(model, 4, 8);
  cluster.Create(
      model, plan, Optimizer(), 5000, [&](int rank, EngineOptions& options) {
        if (rank != kPending) return;
        options.commit_fault = [&fail]() {
          return fail ? absl::UnavailableError("injected") : absl::OkStatus();
        };
      });
  undisturbed.Create(model, plan, Optimizer());
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  for (const absl::Status& s : undisturbed.create_status) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (const StepResult& r : cluster.Step()) ASSERT_TRUE(r.status.ok());
  for (const StepResult& r : undisturbed.Step()) ASSERT_TRUE(r.status.ok());
  for (const StepResult& r : undisturbed.Step()) ASSERT_TRUE(r.status.ok());

  fail = true;
  const std::vector<StepResult> results = cluster.Step();
  const std::vector<uint8_t> before_finish =
      OwnedState(cluster.engines[kPending]->buffers());
  for (int r = 0; r < 4; ++r) {
    ASSERT_FALSE(results[r].status.ok()) << "rank " << r;
    if (r == kPending) {
      EXPECT_TRUE(results[r].commit_pending);
      EXPECT_TRUE(results[r].commit_values.empty());
      EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kFailedBeforeCommit);
      EXPECT_EQ(cluster.engines[r]->step(), 1);
      continue;
    }
    // The others passed the commit point; their all-gather with the
    // failed rank broke.
    EXPECT_FALSE(results[r].commit_pending);
    EXPECT_EQ(results[r].telemetry.outcome, StepOutcome::kFailedAfterCommit)
        << "rank " << r << ": " << results[r].status;
    EXPECT_EQ(cluster.engines[r]->step(), 2);
    EXPECT_EQ(OwnedState(cluster.engines[r]->buffers()),
              OwnedState(undisturbed.engines[r]->buffers()))
        << "rank " << r;
  }
  StepEngine& pending = *cluster.engines[kPending];
  EXPECT_NE(before_finish,
            OwnedState(undisturbed.engines[kPending]->buffers()));
  EXPECT_EQ(
      cluster.engines[0]->FinishPendingStep(results[0].commit_values).code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pending.FinishPendingStep({1.0}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(pending.FinishPendingStep(results[0].commit_values).ok());
  EXPECT_EQ(pending.step(), 2);
  EXPECT_EQ(pending.adam_step(), 2);
  EXPECT_EQ(OwnedState(pending.buffers()),
            OwnedState(undisturbed.engines[kPending]->buffers()));
  EXPECT_EQ(pending.FinishPendingStep(results[0].commit_values).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StepEngineCommitPendingTest, FinishingASkippedStepOnlyCounts) {
  const plan::ModelSpec model = Model(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 2, 1);
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 2, 8);
  cluster.Create(model, plan, Optimizer(), 5000,
                 [&](int rank, EngineOptions& options) {
                   if (rank != 1) return;
                   options.commit_fault = [] {
                     return absl::UnavailableError("injected");
                   };
                 });
  for (const absl::Status& s : cluster.create_status) ASSERT_TRUE(s.ok()) << s;
  const std::vector<StepResult> results = cluster.Step();
  ASSERT_TRUE(results[1].commit_pending);
  const std::vector<uint8_t> before = OwnedState(cluster.engines[1]->buffers());
  // A peer that saw one non-finite element skipped the step.
  std::vector<double> values = results[0].commit_values;
  ASSERT_EQ(values.size(), 4u);
  values[0] = 1;
  ASSERT_TRUE(cluster.engines[1]->FinishPendingStep(values).ok());
  EXPECT_EQ(cluster.engines[1]->step(), 1);
  EXPECT_EQ(cluster.engines[1]->adam_step(), 0);
  EXPECT_EQ(cluster.engines[1]->skipped_steps(), 1);
  EXPECT_EQ(OwnedState(cluster.engines[1]->buffers()), before);
}

struct Reshape {
  int from_world, from_instances, to_world, to_instances;
  plan::DType dtype;
};

void PrintTo(const Reshape& c, std::ostream* os) {
  *os << c.from_world << "x" << c.from_instances << "->" << c.to_world << "x"
      << c.to_instances << " " << plan::DTypeName(c.dtype);
}

// Copies, in param space, every owned element of `to` from whichever rank
// of `from` owns it (any instance's replica).
void CopyState(const std::vector<const EngineBuffers*>& from,
               EngineBuffers& to) {
  constexpr StateArray kArrays[] = {StateArray::kMaster, StateArray::kExpAvg,
                                    StateArray::kExpAvgSq};
  for (size_t w = 0; w < to.windows().size(); ++w) {
    const WindowState& win = to.windows()[w];
    std::vector<float> dst[3];
    for (int a = 0; a < 3; ++a) {
      dst[a] = zshard::testing::ReadArray(to, kArrays[a], static_cast<int>(w));
    }
    for (const plan::Piece& piece : win.pieces) {
      for (const EngineBuffers* src : from) {
        for (size_t sw = 0; sw < src->windows().size(); ++sw) {
          const WindowState& swin = src->windows()[sw];
          std::vector<float> from_arrays[3];
          for (int a = 0; a < 3; ++a) {
            from_arrays[a] = zshard::testing::ReadArray(*src, kArrays[a],
                                                        static_cast<int>(sw));
          }
          for (const plan::Piece& sp : swin.pieces) {
            if (sp.param_index != piece.param_index) continue;
            const int64_t b = std::max(sp.param_start, piece.param_start);
            const int64_t e = std::min(sp.param_end, piece.param_end);
            for (int64_t j = b; j < e; ++j) {
              const int64_t at =
                  piece.start - win.start + j - piece.param_start;
              const int64_t sat = sp.start - swin.start + j - sp.param_start;
              for (int a = 0; a < 3; ++a) dst[a][at] = from_arrays[a][sat];
            }
          }
        }
      }
    }
    for (int a = 0; a < 3; ++a) {
      zshard::testing::WriteArray(to, kArrays[a], static_cast<int>(w), dst[a]);
    }
  }
}

class CreateFromStateTest : public ::testing::TestWithParam<Reshape> {};

TEST_P(CreateFromStateTest, ContinuesToTheUndisturbedMasters) {
  const Reshape c = GetParam();
  constexpr int kStepsBefore = 2, kStepsAfter = 2;
  constexpr int64_t kBatch = 12;
  const plan::ModelSpec model = Model(c.dtype);
  const plan::Plan old_plan =
      MakeTestPlan(model, c.from_world, c.from_instances);
  const plan::Plan new_plan = MakeTestPlan(model, c.to_world, c.to_instances);
  const job::OptimizerSpec opt = Optimizer();

  testing::Cluster old_cluster;
  old_cluster.MakeSynthetic(model, c.from_world, kBatch);
  old_cluster.Create(model, old_plan, opt);
  for (const absl::Status& s : old_cluster.create_status) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ReferenceOptimizer::Options ro;
  ro.world = c.from_world;
  ro.instances = c.from_instances;
  ro.optimizer = opt;
  ReferenceOptimizer reference(model, ro, *old_cluster.workloads[0]);
  auto reference_step = [&](testing::Cluster& cluster) {
    std::vector<Workload*> w;
    for (auto& x : cluster.workloads) w.push_back(x.get());
    absl::StatusOr<bool> applied = reference.Step(w);
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(*applied);
  };
  for (int s = 0; s < kStepsBefore; ++s) {
    for (const StepResult& r : old_cluster.Step()) ASSERT_TRUE(r.status.ok());
    reference_step(old_cluster);
  }

  // The new world: fresh buffers filled in param space from the old one.
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, c.to_world, kBatch);
  std::vector<const EngineBuffers*> sources;
  for (auto& e : old_cluster.engines) sources.push_back(&e->buffers());
  cluster.engines.resize(c.to_world);
  std::vector<absl::Status> status(c.to_world);
  testing::RunRanks(c.to_world, [&](int r) {
    absl::StatusOr<std::unique_ptr<EngineBuffers>> buffers =
        EngineBuffers::Create(model, new_plan, r, *cluster.workloads[r]);
    if (!buffers.ok()) {
      status[r] = buffers.status();
      return;
    }
    CopyState(sources, **buffers);
    EngineConfig config;
    config.model = model;
    config.plan = new_plan;
    config.rank = r;
    config.optimizer = opt;
    config.store = &cluster.store;
    EngineOptions options;
    options.comm_timeout_ms = 10000;
    options.adam_threads = 1;
    absl::StatusOr<std::unique_ptr<StepEngine>> engine =
        StepEngine::CreateFromState(config, options, std::move(*buffers),
                                    kStepsBefore, kStepsBefore);
    if (engine.ok()) {
      cluster.engines[r] = std::move(*engine);
    } else {
      status[r] = engine.status();
    }
  });
  for (const absl::Status& s : status) ASSERT_TRUE(s.ok()) << s;
  // Every rank's params are complete and equal the old world's.
  for (int r = 0; r < c.to_world; ++r) {
    EXPECT_EQ(cluster.engines[r]->step(), kStepsBefore);
    EXPECT_EQ(cluster.engines[r]->adam_step(), kStepsBefore);
    for (size_t p = 0; p < model.params.size(); ++p) {
      ASSERT_EQ(zshard::testing::Param(cluster.engines[r]->buffers(),
                                       static_cast<int>(p)),
                zshard::testing::Param(old_cluster.engines[0]->buffers(),
                                       static_cast<int>(p)))
          << "rank " << r << " param " << p;
    }
  }

  reference.set_topology(c.to_world, c.to_instances);
  for (int s = 0; s < kStepsAfter; ++s) {
    for (const StepResult& r : cluster.Step()) {
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.telemetry.adam_step, kStepsBefore + s + 1);
    }
    reference_step(cluster);
  }
  const std::string dir = absl::StrCat(
      ::testing::TempDir(), "/from_state_", c.from_world, c.from_instances,
      c.to_world, c.to_instances, plan::DTypeName(c.dtype));
  std::filesystem::remove_all(dir);
  for (auto& e : cluster.engines)
    ASSERT_TRUE(DumpMasters(e->buffers(), dir).ok());
  absl::StatusOr<std::map<std::string, std::vector<float>>> masters =
      LoadMasters(dir, model);
  ASSERT_TRUE(masters.ok()) << masters.status();
  // Tolerance as in step_engine_test: a few ulps per step from the norm.
  float max_abs = 0;
  for (size_t p = 0; p < model.params.size(); ++p) {
    for (float x : reference.master(p))
      max_abs = std::max(max_abs, std::fabs(x));
  }
  const double tol =
      ((kStepsBefore + kStepsAfter) * 4 + 1) * std::ldexp(max_abs, -23);
  for (size_t p = 0; p < model.params.size(); ++p) {
    const std::vector<float>& got = masters->at(model.params[p].name);
    const std::vector<float>& want = reference.master(p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_NEAR(got[j], want[j], tol)
          << model.params[p].name << "[" << j << "]";
    }
    for (auto& e : cluster.engines) {
      const std::vector<float> param =
          zshard::testing::Param(e->buffers(), static_cast<int>(p));
      for (size_t j = 0; j < param.size(); ++j) {
        ASSERT_EQ(param[j], RoundTo(c.dtype, got[j]));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reshapes, CreateFromStateTest,
    ::testing::Values(Reshape{2, 1, 3, 1, plan::DType::kBf16},
                      Reshape{4, 2, 2, 1, plan::DType::kBf16},
                      Reshape{2, 1, 4, 2, plan::DType::kFp32},
                      Reshape{3, 1, 1, 1, plan::DType::kBf16}),
    [](const ::testing::TestParamInfo<Reshape>& info) {
      const Reshape& c = info.param;
      return absl::StrCat("W", c.from_world, "I", c.from_instances, "_to_W",
                          c.to_world, "I", c.to_instances, "_",
                          plan::DTypeName(c.dtype));
    });

TEST(CreateFromStateArgsTest, RejectsBuffersOfAnotherRankOrBadCounters) {
  const plan::ModelSpec model = Model(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 1, 1);
  SyntheticWorkload workload(model, {});
  EngineConfig config;
  config.model = model;
  config.plan = plan;
  config.optimizer = Optimizer();
  auto make = [&]() {
    return std::move(*EngineBuffers::Create(model, plan, 0, workload));
  };
  EXPECT_EQ(
      StepEngine::CreateFromState(config, {}, nullptr, 1, 1).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      StepEngine::CreateFromState(config, {}, make(), 1, 2).status().code(),
      absl::StatusCode::kInvalidArgument);
  const plan::Plan other = MakeTestPlan(model, 2, 1);
  absl::StatusOr<std::unique_ptr<EngineBuffers>> foreign =
      EngineBuffers::Create(model, other, 0, workload);
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(StepEngine::CreateFromState(config, {}, std::move(*foreign), 1, 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<StepEngine>> ok =
      StepEngine::CreateFromState(config, {}, make(), 5, 3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->step(), 5);
  EXPECT_EQ((*ok)->adam_step(), 3);
  EXPECT_EQ((*ok)->skipped_steps(), 2);
}

// A rank whose peer never joins the parameter all-gather is ended by an
// Abort() through on_connected, long before the communicator timeout; the
// peer then fails too instead of waiting out its own timeout.
TEST(CreateFromStateAbortTest, AbortThroughOnConnectedEndsTheAllGather) {
  const plan::ModelSpec model = Model(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 2, 1);
  testing::Cluster cluster;
  cluster.MakeSynthetic(model, 2, 4);
  absl::Notification rank0_connected;
  absl::Notification rank0_done;
  std::atomic<StepEngine*> rank0_engine{nullptr};
  std::vector<absl::Status> status(2);
  std::vector<absl::Duration> took(2);
  std::thread aborter([&] {
    rank0_connected.WaitForNotification();
    rank0_engine.load()->Abort();
  });
  testing::RunRanks(2, [&](int r) {
    absl::StatusOr<std::unique_ptr<EngineBuffers>> buffers =
        EngineBuffers::Create(model, plan, r, *cluster.workloads[r]);
    ASSERT_TRUE(buffers.ok()) << buffers.status();
    EngineConfig config;
    config.model = model;
    config.plan = plan;
    config.rank = r;
    config.optimizer = Optimizer();
    config.store = &cluster.store;
    EngineOptions options;
    // Twice the bound below: without the abort the test fails, not hangs.
    options.comm_timeout_ms = 20000;
    options.adam_threads = 1;
    options.on_connected = [&, r](StepEngine* engine) {
      if (r == 0) {
        if (engine != nullptr) {
          rank0_engine.store(engine);
          rank0_connected.Notify();
        }
      } else if (engine != nullptr) {
        // Rank 1 joins the all-gather only after rank 0 gave up.
        rank0_done.WaitForNotification();
      }
    };
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<StepEngine>> engine =
        StepEngine::CreateFromState(config, options, std::move(*buffers), 1, 1);
    took[r] = absl::Now() - start;
    status[r] = engine.status();
    if (r == 0) rank0_done.Notify();
  });
  aborter.join();
  EXPECT_EQ(status[0].code(), absl::StatusCode::kAborted) << status[0];
  EXPECT_FALSE(status[1].ok());
  EXPECT_LT(took[0], absl::Seconds(10));
  EXPECT_LT(took[1], absl::Seconds(10));
}

}  // namespace
}  // namespace zshard::engine
