// Model-parallel job specs: parallel and model.slots parse and round-trip,
// a job without parallel serialises exactly as before, a Llama preset is
// split per slot, the slots' plan options, and each bad combination is
// refused in one line naming the field.
#include <string>

#include "common/job/job_slot.h"
#include "common/job/job_spec.h"
#include "common/plan/parallel_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::job {
namespace {

using ::testing::HasSubstr;

std::string Slot(int tp, int pp, const std::string& extra = "") {
  const std::string p = "s" + std::to_string(tp) + std::to_string(pp);
  return R"({"tp": )" + std::to_string(tp) + R"(, "pp": )" +
         std::to_string(pp) + R"(, "params": [{"name": ")" + p +
         R"(.w", "shape": [)" + std::to_string(8 + tp + 4 * pp) +
         R"(, 4]}, {"name": ")" + p +
         R"(.ln", "shape": [4], "tp_replicated": true)" + extra + "}]}";
}

// T = 2, P = 2, C = 2 with the four slots in the given text.
std::string Job(const std::string& slots,
                const std::string& world = R"({"min": 8, "max": 16})") {
  return R"({"name": "mp", "parallel": {"tensor": 2, "pipeline": 2,
      "context": 2}, "model": {"slots": [)" +
         slots + R"(]}, "world": )" + world + "}";
}

const std::string kSlots =
    Slot(1, 1) + ", " + Slot(0, 0) + ", " + Slot(1, 0) + ", " + Slot(0, 1);

TEST(JobParallelTest, ParsesSlotsInSlotOrderAndRoundTrips) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(Job(kSlots));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->parallel, (plan::ParallelSizes{2, 2, 2}));
  EXPECT_TRUE(HasModel(*spec));
  EXPECT_TRUE(spec->model.params.empty());
  ASSERT_EQ(spec->slots.size(), 4u);
  // By slot index tp + T x pp, whatever the order in the file.
  EXPECT_EQ(spec->slots[0].params[0].name, "s00.w");
  EXPECT_EQ(spec->slots[1].params[0].name, "s10.w");
  EXPECT_EQ(spec->slots[2].params[0].name, "s01.w");
  EXPECT_EQ(spec->slots[3].params[0].shape, (std::vector<int64_t>{13, 4}));
  EXPECT_TRUE(spec->slots[3].params[1].tp_replicated);
  const std::string json = JobSpecToJson(*spec);
  EXPECT_THAT(json, HasSubstr(R"("parallel":{"context":2,"pipeline":2,)"));
  absl::StatusOr<JobSpec> again = ParseJobSpec(json);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(JobSpecToJson(*again), json);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(plan::ModelSpecToJson(again->slots[s]),
              plan::ModelSpecToJson(spec->slots[s]));
  }
  // The slots plan: W = 16 is R = 2 replicas, R x C = 4, I = 2.
  const plan::ParallelPlanOptions o = JobParallelPlanOptions(*spec, 16);
  EXPECT_EQ(o.instances, 2);
  EXPECT_EQ(o.layout.max_world, 4);
  absl::StatusOr<plan::ParallelPlan> p =
      plan::MakeParallelPlan(JobParallelModel(*spec), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->data_parallel, 4);
  EXPECT_EQ(p->slots[3].shard_group_size, 2);
  // keep_d at W = 8 keeps D = 2: one instance.
  EXPECT_EQ(JobParallelPlanOptions(*spec, 8).instances, 1);
}

TEST(JobParallelTest, AJobWithoutParallelSerialisesAsBefore) {
  // What JobSpecToJson wrote for these files before parallel existed.
  const struct {
    const char* in;
    const char* out;
  } kCases[] = {
      {R"({"name": "j", "model": {"preset": "gpt2-small"}})",
       R"({"checkpoint":{"dir":"","every_steps":0},"heartbeat_interval_ms":1000,"isolation_fraction":0.5,"layout":{"bucket_size":0,"expert_parallel":1,"grad_reduce_in_fp32":false,"pad_for_high_nccl_busbw":false},"lease_timeout_ms":5000,"link_quarantine_ms":600000,"model":{"preset":"gpt2-small"},"name":"j","optimizer":{"beta1":0.9,"beta2":0.999,"clip_grad_norm":0.0,"eps":1e-08,"lr":0.001,"weight_decay":0.0},"transition_settle_ms":300,"transition_timeout_ms":20000,"workload":{"global_batch":64,"kind":"idle","step_delay_ms":100,"steps":0},"world":{"instances":2,"max":4,"min":2}})"},
      {R"({"name": "j", "parallel": {"tensor": 1}, "model": {"params":
          [{"name": "w", "shape": [4, 4], "no_weight_decay": true}]}})",
       R"({"checkpoint":{"dir":"","every_steps":0},"heartbeat_interval_ms":1000,"isolation_fraction":0.5,"layout":{"bucket_size":0,"expert_parallel":1,"grad_reduce_in_fp32":false,"pad_for_high_nccl_busbw":false},"lease_timeout_ms":5000,"link_quarantine_ms":600000,"model":{"name":"","params":[{"dtype":"bf16","name":"w","no_weight_decay":true,"shape":[4,4]}]},"name":"j","optimizer":{"beta1":0.9,"beta2":0.999,"clip_grad_norm":0.0,"eps":1e-08,"lr":0.001,"weight_decay":0.0},"transition_settle_ms":300,"transition_timeout_ms":20000,"workload":{"global_batch":64,"kind":"idle","step_delay_ms":100,"steps":0},"world":{"instances":2,"max":4,"min":2}})"},
  };
  for (const auto& c : kCases) {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(c.in);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_FALSE(spec->parallel.model_parallel());
    EXPECT_TRUE(spec->slots.empty());
    EXPECT_EQ(JobSpecToJson(*spec), c.out);
    // One slot holding the model; the plan options are JobPlanOptions'.
    const plan::ParallelModel m = JobParallelModel(*spec);
    ASSERT_EQ(m.slots.size(), 1u);
    const plan::PlanOptions single = JobPlanOptions(*spec, 4);
    const plan::ParallelPlanOptions o = JobParallelPlanOptions(*spec, 4);
    EXPECT_EQ(o.instances, single.instances);
    EXPECT_EQ(o.layout.max_world, single.layout.max_world);
    EXPECT_EQ(plan::MakeParallelPlan(m, o)->slots[0].hash,
              plan::MakePlan(spec->model, single)->hash);
  }
}

TEST(JobParallelTest, APresetIsSplitPerSlotAndStaysAPreset) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      R"({"name": "big", "model": {"preset": "llama2-70b"},
          "parallel": {"tensor": 8, "pipeline": 4},
          "world": {"instances": 8, "min": 256, "max": 1024}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->slots.size(), 32u);
  EXPECT_TRUE(spec->model.params.empty());
  EXPECT_EQ(spec->slots[31].params.back().name, "lm_head.weight");
  const std::string json = JobSpecToJson(*spec);
  EXPECT_THAT(json, HasSubstr(R"("model":{"preset":"llama2-70b"})"));
  EXPECT_THAT(json, HasSubstr(R"("parallel":{"pipeline":4,"tensor":8})"));
  absl::StatusOr<JobSpec> again = ParseJobSpec(json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(JobSpecToJson(*again), json);
  EXPECT_EQ(JobParallelPlanOptions(*spec, 1024).layout.max_world, 32);
}

struct BadCase {
  std::string json;
  std::string message;
};

class JobParallelBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobParallelBadTest, FailsWithOneLineNamingTheField) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(GetParam().json);
  ASSERT_FALSE(spec.ok()) << GetParam().json;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(spec.status().message());
  EXPECT_THAT(message, HasSubstr(GetParam().message));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

const std::string kThree = Slot(0, 0) + ", " + Slot(1, 0) + ", " + Slot(0, 1);

INSTANTIATE_TEST_SUITE_P(
    Cases, JobParallelBadTest,
    ::testing::Values(
        BadCase{Job(kThree), "model.slots has no slot (tp 1, pp 1)"},
        BadCase{Job(kSlots + ", " + Slot(1, 0)),
                "model.slots[4] duplicates slot (tp 1, pp 0)"},
        BadCase{Job(kThree + ", " + Slot(2, 1)),
                "model.slots[3].tp (2) is out of range [0, 2)"},
        BadCase{Job(kThree + ", " + Slot(1, 2)),
                "model.slots[3].pp (2) is out of range [0, 2)"},
        BadCase{Job(kThree + R"(, {"tp": 1, "params": []})"),
                "model.slots[3].pp is missing"},
        BadCase{Job(kThree + R"(, {"tp": 1, "pp": 1, "layers": []})"),
                "unknown field model.slots[3].layers"},
        BadCase{Job(kThree + R"(, {"tp": 1, "pp": 1, "params": []})"),
                "model.slots[3]: model spec: 'params' is empty"},
        BadCase{Job(kThree + ", " + Slot(1, 1, R"(, "tp_replicated": 2)")),
                "field 'tp_replicated' is not a boolean"},
        BadCase{Job(kSlots, R"({"min": 8, "max": 12})"),
                "world.max (12) is not a multiple of parallel.tensor x "
                "pipeline x context (8)"},
        BadCase{Job(kSlots, R"({"min": 4, "max": 16})"),
                "world.min (4) is not a multiple of parallel.tensor x "
                "pipeline x context (8)"},
        BadCase{Job(kSlots, R"({"instances": 8, "min": 8, "max": 16})"),
                "world.instances (8) does not divide the data-parallel size "
                "R x C at world.max (4)"},
        BadCase{R"({"name": "j", "model": {"slots": [{"tp": 0, "pp": 0,
                   "params": [{"name": "w", "shape": [4]}]}]}})",
                "model.slots needs parallel with tensor, pipeline or context "
                "above 1"},
        BadCase{R"({"name": "j", "parallel": {"tensor": 2},
                   "model": {"params": [{"name": "w", "shape": [4]}]}})",
                "parallel above 1 needs model.slots"},
        BadCase{R"({"name": "j", "parallel": {"pipeline": 2},
                   "workload": {"kind": "trainer"}})",
                "a model-parallel job needs model.slots or a model.preset"},
        BadCase{R"({"name": "j", "parallel": {"tensor": 2},
                   "model": {"preset": "gpt2-small"}})",
                "model.preset: preset 'gpt2-small' has no model-parallel"},
        BadCase{R"({"name": "j", "parallel": {"tensor": 0},
                   "model": {"preset": "gpt2-small"}})",
                "parallel.tensor must be in [1, 65536]"},
        BadCase{R"({"name": "j", "parallel": {"data": 2},
                   "model": {"preset": "gpt2-small"}})",
                "unknown field parallel.data"},
        BadCase{R"({"name": "j", "parallel": {"tensor": 2}, "model":
                   {"slots": [], "params": []}})",
                "model must have exactly one of 'preset', 'params' and "
                "'slots'"}));

}  // namespace
}  // namespace zshard::job

namespace zshard::job {
namespace {

// A worker rank's slot job: its slot's params, the data-parallel sizes, and
// a plan that is the parallel plan's slot plan (same hash).
TEST(SlotJobTest, ARankRunsItsSlotsSingleSlotJob) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(Job(kSlots));
  ASSERT_TRUE(spec.ok()) << spec.status();
  // W = 16, T = P = C = 2: R = 2; rank 13 = tp 1 + 2 x (cp 0 + 2 x (replica
  // 1 + 2 x pp 1)).
  absl::StatusOr<SlotJob> slot = SlotJobOf(*spec, 16, 13);
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ(slot->position, (plan::Position{1, 1, 1, 0}));
  EXPECT_EQ(slot->slot, 3);
  EXPECT_EQ(slot->world, 4);  // R x C
  EXPECT_EQ(slot->rank, 2);   // cp + C x replica
  EXPECT_EQ(slot->spec.model.params[0].name, "s11.w");
  EXPECT_FALSE(slot->spec.parallel.model_parallel());
  EXPECT_EQ(slot->spec.world.max, 4);
  EXPECT_EQ(slot->group, (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(slot->across, (std::vector<int>{4, 5, 12, 13}));
  absl::StatusOr<plan::Plan> own =
      plan::MakePlan(slot->spec.model, JobPlanOptions(slot->spec, slot->world));
  absl::StatusOr<plan::ParallelPlan> whole = plan::MakeParallelPlan(
      JobParallelModel(*spec), JobParallelPlanOptions(*spec, 16));
  ASSERT_TRUE(own.ok() && whole.ok());
  EXPECT_EQ(own->hash, whole->slots[3].hash);
  EXPECT_EQ(ParallelJobHash(*spec, 16), whole->hash);
  EXPECT_FALSE(SlotJobOf(*spec, 12, 0).ok());   // not a multiple of 8
  EXPECT_FALSE(SlotJobOf(*spec, 16, 16).ok());  // rank outside the world
}

}  // namespace
}  // namespace zshard::job
