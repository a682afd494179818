// The step engine on a CUDA device against the same engine on the host:
// at W = 1 (and W = 2 over NCCL where two devices exist) every owned
// master, m and v and every param is bit-identical after several steps
// with weight decay and clipping (one formula, no fused multiply-adds, one
// reduction order); the measured device ledger equals the planner's
// prediction; checkpoints, master dumps and local state moves from device
// memory equal the host's. Skipped without a CUDA device.
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/engine/master_dump.h"
#include "client/worker/reshard/state_mover.h"
#include "common/plan/ledger.h"
#include "gtest/gtest.h"
#include "tests/worker/engine/buffer_readback.h"
#include "tests/worker/engine/engine_cluster.h"

namespace zshard::engine {
namespace {

using device::DeviceKind;
using device::DeviceSpec;

constexpr int64_t kBatch = 16;

plan::ModelSpec SmallModel(plan::DType dtype) {
  plan::ModelSpec spec;
  spec.name = "small";
  const int64_t sizes[] = {1000, 300, 2500, 7, 130, 700, 70001};
  for (int i = 0; i < 7; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("p", i);
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
  po.layout.bucket_size = 6000;
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

job::OptimizerSpec Optimizer() {
  job::OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.weight_decay = 0.1;
  opt.clip_grad_norm = 0.05;  // the batch-mean norm is larger: clips
  return opt;
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

// A cluster of `world` ranks, rank r on cuda:r or on the host.
void MakeCluster(testing::Cluster& cluster, const plan::ModelSpec& model,
                 const plan::Plan& plan, bool cuda) {
  cluster.MakeSynthetic(model, plan.world, kBatch);
  cluster.Create(model, plan, Optimizer(), 60000,
                 [cuda](int r, EngineOptions& o) {
                   if (cuda) o.device = DeviceSpec{DeviceKind::kCuda, r};
                 });
  for (int r = 0; r < plan.world; ++r) {
    ASSERT_TRUE(cluster.create_status[r].ok()) << cluster.create_status[r];
  }
}

struct Case {
  int world;
  int instances;
  plan::DType dtype;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "W=" << c.world << " I=" << c.instances << " "
      << plan::DTypeName(c.dtype);
}

class EngineCudaTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const int devices = cuda::DeviceCount();
    if (devices == 0) GTEST_SKIP() << "no cuda device";
    if (devices < GetParam().world) {
      GTEST_SKIP() << "needs " << GetParam().world << " cuda devices";
    }
  }
};

TEST_P(EngineCudaTest, MastersEqualTheHostEngineBitForBit) {
  const Case c = GetParam();
  const plan::ModelSpec model = SmallModel(c.dtype);
  const plan::Plan plan = MakeTestPlan(model, c.world, c.instances);
  testing::Cluster host, gpu;
  MakeCluster(host, model, plan, false);
  MakeCluster(gpu, model, plan, true);
  for (int step = 1; step <= 4; ++step) {
    const std::vector<StepResult> want = host.Step();
    const std::vector<StepResult> got = gpu.Step();
    for (int r = 0; r < c.world; ++r) {
      ASSERT_TRUE(want[r].status.ok()) << want[r].status;
      ASSERT_TRUE(got[r].status.ok()) << "rank " << r << ": " << got[r].status;
      EXPECT_EQ(got[r].telemetry.outcome, StepOutcome::kApplied);
      EXPECT_EQ(got[r].telemetry.grad_norm, want[r].telemetry.grad_norm)
          << "step " << step;
      EXPECT_EQ(got[r].commit_values, want[r].commit_values);
    }
  }
  for (int r = 0; r < c.world; ++r) {
    EXPECT_TRUE(Snapshot(gpu.engines[r]->buffers()) ==
                Snapshot(host.engines[r]->buffers()))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EngineCudaTest,
                         ::testing::Values(Case{1, 1, plan::DType::kBf16},
                                           Case{1, 1, plan::DType::kFp16},
                                           Case{1, 1, plan::DType::kFp32},
                                           Case{2, 1, plan::DType::kBf16},
                                           Case{2, 2, plan::DType::kBf16}));

class EngineCudaStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no cuda device";
  }
};

TEST_F(EngineCudaStateTest, DeviceLedgerEqualsThePrediction) {
  for (const plan::DType dtype : {plan::DType::kBf16, plan::DType::kFp32}) {
    const plan::ModelSpec model = SmallModel(dtype);
    const plan::Plan plan = MakeTestPlan(model, 4, 2);
    SyntheticWorkload workload(model, {});
    for (int rank = 0; rank < 4; ++rank) {
      absl::StatusOr<std::unique_ptr<EngineBuffers>> b = EngineBuffers::Create(
          model, plan, rank, workload, DeviceSpec{DeviceKind::kCuda, 0});
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ((*b)->device().spec().kind, DeviceKind::kCuda);
      const MemoryBytes got = (*b)->memory();
      const plan::StageBytes want =
          plan::RankStageBytes(model, plan, rank, plan::Stage::kZero1);
      EXPECT_EQ(got.param, want.param_bytes);
      EXPECT_EQ(got.grad, want.grad_bytes);
      EXPECT_EQ(got.master, want.master_bytes);
      EXPECT_EQ(got.exp_avg, want.exp_avg_bytes);
      EXPECT_EQ(got.exp_avg_sq, want.exp_avg_sq_bytes);
      EXPECT_EQ(got.total() - got.comm, want.total_bytes);
    }
  }
  // The step's telemetry reports the same ledger.
  const plan::ModelSpec model = SmallModel(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 1, 1);
  testing::Cluster gpu;
  MakeCluster(gpu, model, plan, true);
  const std::vector<StepResult> r = gpu.Step();
  ASSERT_TRUE(r[0].status.ok()) << r[0].status;
  const plan::StageBytes want =
      plan::RankStageBytes(model, plan, 0, plan::Stage::kZero1);
  EXPECT_EQ(r[0].telemetry.memory.total() - r[0].telemetry.memory.comm,
            want.total_bytes);
}

TEST_F(EngineCudaStateTest, CheckpointsDumpsAndMovesFromDeviceMemory) {
  const plan::ModelSpec model = SmallModel(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 1, 1);
  testing::Cluster host, gpu;
  MakeCluster(host, model, plan, false);
  MakeCluster(gpu, model, plan, true);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(host.Step()[0].status.ok());
    ASSERT_TRUE(gpu.Step()[0].status.ok());
  }
  const std::string root = absl::StrCat(::testing::TempDir(), "/engine_cuda");
  std::filesystem::remove_all(root);
  // Checkpoint files: the same bytes.
  absl::StatusOr<checkpoint::RankFileInfo> want = checkpoint::WriteRankFile(
      host.engines[0]->buffers(), root + "/host", 0, 2, 2);
  absl::StatusOr<checkpoint::RankFileInfo> got = checkpoint::WriteRankFile(
      gpu.engines[0]->buffers(), root + "/gpu", 0, 2, 2);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ(got->checksum, want->checksum);
  EXPECT_EQ(got->bytes, want->bytes);
  // Master dumps: the same values.
  ASSERT_TRUE(
      DumpMasters(host.engines[0]->buffers(), root + "/dump_host").ok());
  ASSERT_TRUE(DumpMasters(gpu.engines[0]->buffers(), root + "/dump_gpu").ok());
  auto host_masters = LoadMasters(root + "/dump_host", model);
  auto gpu_masters = LoadMasters(root + "/dump_gpu", model);
  ASSERT_TRUE(host_masters.ok() && gpu_masters.ok());
  EXPECT_TRUE(*host_masters == *gpu_masters);

  // A local state move (device to device) into new buffers, an engine on
  // them, two more steps: still the host engine's bits.
  SyntheticWorkload::Options wo;
  wo.global_batch = kBatch;
  SyntheticWorkload workload(model, wo);
  absl::StatusOr<std::unique_ptr<EngineBuffers>> fresh = EngineBuffers::Create(
      model, plan, 0, workload, DeviceSpec{DeviceKind::kCuda, 0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  reshard::MoveInput move;
  move.self = "w0";
  move.old_state = &gpu.engines[0]->buffers();
  move.new_state = fresh->get();
  reshard::StateMover mover(std::move(move));
  absl::StatusOr<reshard::MoveStats> stats = mover.Run();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->bytes_kept, 0);
  EngineConfig config;
  config.model = model;
  config.plan = plan;
  config.optimizer = Optimizer();
  EngineOptions options;
  options.device = DeviceSpec{DeviceKind::kCuda, 0};
  absl::StatusOr<std::unique_ptr<StepEngine>> moved =
      StepEngine::CreateFromState(config, options, *std::move(fresh), 2, 2);
  ASSERT_TRUE(moved.ok()) << moved.status();
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(host.Step()[0].status.ok());
    const StepResult r = (*moved)->Step(*gpu.workloads[0]);
    ASSERT_TRUE(r.status.ok()) << r.status;
  }
  EXPECT_TRUE(Snapshot((*moved)->buffers()) ==
              Snapshot(host.engines[0]->buffers()));
  std::filesystem::remove_all(root);
}

TEST_F(EngineCudaStateTest, BuffersOnAnotherDeviceAreRefused) {
  const plan::ModelSpec model = SmallModel(plan::DType::kBf16);
  const plan::Plan plan = MakeTestPlan(model, 1, 1);
  SyntheticWorkload workload(model, {});
  absl::StatusOr<std::unique_ptr<EngineBuffers>> b =
      EngineBuffers::Create(model, plan, 0, workload);
  ASSERT_TRUE(b.ok());
  EngineConfig config;
  config.model = model;
  config.plan = plan;
  EngineOptions options;
  options.device = DeviceSpec{DeviceKind::kCuda, 0};
  EXPECT_EQ(StepEngine::CreateFromState(config, options, *std::move(b), 0, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zshard::engine
