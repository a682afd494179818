// Job spec parsing: defaults, presets, one clear error per bad field, and
// which models each workload kind can run.
#include "common/job/job_spec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/job/workload_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/test_job.h"

namespace zshard::job {
namespace {

using ::testing::HasSubstr;

constexpr char kIssueExample[] = R"({"name": "demo",
 "model": {"preset": "gpt2-small"},
 "layout": {"bucket_size": 40000000, "grad_reduce_in_fp32": false,
            "pad_for_high_nccl_busbw": false, "expert_parallel": 1},
 "optimizer": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
               "weight_decay": 0.0, "clip_grad_norm": 0.0},
 "world": {"instances": 2, "min": 2, "max": 4},
 "lease_timeout_ms": 5000, "heartbeat_interval_ms": 1000,
 "workload": {"kind": "idle", "steps": 0, "global_batch": 64, "step_delay_ms": 100},
 "checkpoint": {"dir": "", "every_steps": 0}})";

TEST(JobSpecTest, ParsesTheFullExample) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kIssueExample);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "demo");
  EXPECT_EQ(spec->model_preset, "gpt2-small");
  EXPECT_GT(spec->model.numel(), 100000000);
  EXPECT_EQ(spec->layout.bucket_size, 40000000);
  EXPECT_EQ(spec->layout.max_world, 4);
  EXPECT_EQ(spec->world.instances, 2);
  EXPECT_EQ(spec->world.max, 4);
  EXPECT_EQ(spec->workload.kind, WorkloadKind::kIdle);
  EXPECT_EQ(spec->workload.step_delay_ms, 100);
  EXPECT_DOUBLE_EQ(spec->optimizer.eps, 1e-8);
}

TEST(JobSpecTest, DefaultsApplyToMissingFields) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(R"({"name": "j", "model": {"preset": "gpt2-small"}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->world.instances, 2);
  EXPECT_EQ(spec->world.min, 2);
  EXPECT_EQ(spec->world.max, 4);
  EXPECT_EQ(spec->lease_timeout_ms, 5000);
  EXPECT_EQ(spec->heartbeat_interval_ms, 1000);
  EXPECT_EQ(spec->workload.global_batch, 64);
  EXPECT_EQ(spec->layout.bucket_size, 0);  // the planner's default
  EXPECT_DOUBLE_EQ(spec->optimizer.lr, 0.001);
}

TEST(JobSpecTest, TrainerWorkloadRoundTrips) {
  absl::StatusOr<JobSpec> a = ParseJobSpec(
      R"({"name": "j", "model": {"preset": "gpt2-small"}, "workload":
          {"kind": "trainer", "steps": 20, "trainer_timeout_ms": 5000}})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->workload.kind, WorkloadKind::kTrainer);
  EXPECT_EQ(a->workload.trainer_timeout_ms, 5000);
  absl::StatusOr<JobSpec> b = ParseJobSpec(JobSpecToJson(*a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->workload.trainer_timeout_ms, 5000);
  EXPECT_EQ(JobSpecToJson(*b), JobSpecToJson(*a));
}

TEST(JobSpecTest, ATrainerJobMayLeaveItsModelOut) {
  absl::StatusOr<JobSpec> a = ParseJobSpec(
      R"({"name": "j", "workload": {"kind": "trainer", "steps": 20}})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(HasModel(*a));
  const std::string json = JobSpecToJson(*a);
  EXPECT_EQ(json.find("\"model\""), std::string::npos) << json;
  absl::StatusOr<JobSpec> b = ParseJobSpec(json);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(HasModel(*b));
  // Any other workload needs one.
  absl::StatusOr<JobSpec> c = ParseJobSpec(
      R"({"name": "j", "workload": {"kind": "synthetic", "steps": 20}})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "model is missing (only a job of workload 'trainer' may leave it "
            "out: it then takes its first trainer's model)");
}

TEST(JobSpecTest, LrScheduleRoundTrips) {
  absl::StatusOr<JobSpec> a = ParseJobSpec(
      R"({"name": "j", "model": {"preset": "gpt2-small"}, "optimizer": {"lr": 0.01,
          "lr_schedule": {"kind": "cosine", "warmup_steps": 5,
          "decay_steps": 50, "min_lr": 0.001}}})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->optimizer.lr_schedule.kind, LrScheduleKind::kCosine);
  EXPECT_EQ(a->optimizer.lr_schedule.warmup_steps, 5);
  EXPECT_EQ(a->optimizer.lr_schedule.decay_steps, 50);
  EXPECT_DOUBLE_EQ(a->optimizer.lr_schedule.min_lr, 0.001);
  absl::StatusOr<JobSpec> b = ParseJobSpec(JobSpecToJson(*a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(JobSpecToJson(*b), JobSpecToJson(*a));
  // The default schedule is not written, so older files keep their form.
  absl::StatusOr<JobSpec> plain =
      ParseJobSpec(R"({"name": "j", "model": {"preset": "gpt2-small"}})");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(JobSpecToJson(*plain).find("lr_schedule"), std::string::npos);
}

TEST(JobSpecTest, ResizePolicyDefaultsByInstancesAndRoundTrips) {
  auto parse = [](const std::string& world) {
    return ParseJobSpec(absl::StrCat(
        R"({"name": "j", "model": {"preset": "gpt2-small"}, "world": )", world,
        "}"));
  };
  absl::StatusOr<JobSpec> two = parse(R"({"instances": 2, "max": 8})");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->world.resize, ResizePolicy::kKeepD);
  EXPECT_EQ(WorldStep(two->world), 4);
  EXPECT_EQ(InstancesOf(two->world, 4), 1);
  EXPECT_EQ(InstancesOf(two->world, 8), 2);
  EXPECT_EQ(InstancesOf(two->world, 6), 0);
  EXPECT_EQ(JobPlanOptions(*two, 4).instances, 1);
  EXPECT_EQ(JobPlanOptions(*two, 4).layout.max_world, 8);
  // The default is not written, so older files keep their form.
  EXPECT_EQ(JobSpecToJson(*two).find("resize"), std::string::npos);
  absl::StatusOr<JobSpec> one = parse(R"({"instances": 1, "max": 8})");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->world.resize, ResizePolicy::kKeepI);
  EXPECT_EQ(WorldStep(one->world), 1);
  EXPECT_EQ(InstancesOf(one->world, 5), 1);
  absl::StatusOr<JobSpec> keep_i =
      parse(R"({"instances": 2, "max": 8, "resize": "keep_i"})");
  ASSERT_TRUE(keep_i.ok()) << keep_i.status();
  EXPECT_EQ(keep_i->world.resize, ResizePolicy::kKeepI);
  EXPECT_EQ(WorldStep(keep_i->world), 2);
  EXPECT_EQ(JobPlanOptions(*keep_i, 4).instances, 2);
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*keep_i));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->world.resize, ResizePolicy::kKeepI);
  absl::StatusOr<JobSpec> keep_d =
      parse(R"({"instances": 1, "min": 4, "max": 4, "resize": "keep_d"})");
  ASSERT_TRUE(keep_d.ok()) << keep_d.status();
  EXPECT_EQ(keep_d->world.resize, ResizePolicy::kKeepD);
  again = ParseJobSpec(JobSpecToJson(*keep_d));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->world.resize, ResizePolicy::kKeepD);
}

TEST(JobSpecTest, RoundTripsThroughJson) {
  JobSpec a = server::testing::TestJob(2, 2, 8, 50);
  absl::StatusOr<JobSpec> b = ParseJobSpec(JobSpecToJson(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->model.params.size(), 2u);
  EXPECT_EQ(b->world.max, 8);
  EXPECT_EQ(b->workload.steps, 50);
  EXPECT_EQ(JobSpecToJson(*b), JobSpecToJson(a));
  absl::StatusOr<JobSpec> c =
      ParseJobSpec(JobSpecToJson(ParseJobSpec(kIssueExample).value()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_preset, "gpt2-small");
}

TEST(JobSpecTest, EachWorkloadKindAcceptsTheModelsItCanRun) {
  const plan::ModelSpec mlp = RegressionModelSpec(MlpShape{8, 16, 2});
  absl::StatusOr<MlpShape> shape = RegressionMlpShape(mlp);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->inputs, 8);
  EXPECT_EQ(shape->hidden, 16);
  EXPECT_EQ(shape->outputs, 2);
  const plan::ModelSpec gpt2 = ParseJobSpec(kIssueExample).value().model;
  for (WorkloadKind kind : {WorkloadKind::kIdle, WorkloadKind::kSynthetic,
                            WorkloadKind::kRegression}) {
    EXPECT_TRUE(CheckWorkloadModel(kind, mlp).ok()) << WorkloadKindName(kind);
  }
  EXPECT_TRUE(CheckWorkloadModel(WorkloadKind::kIdle, gpt2).ok());
  EXPECT_TRUE(CheckWorkloadModel(WorkloadKind::kSynthetic, gpt2).ok());
  const absl::Status bad = CheckWorkloadModel(WorkloadKind::kRegression, gpt2);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("two-layer mlp"));

  plan::ModelSpec mixed = mlp;
  mixed.params[1].dtype = plan::DType::kFp32;
  EXPECT_THAT(std::string(RegressionMlpShape(mixed).status().message()),
              HasSubstr("param 'fc1.bias'"));

  // A regression job over the MLP (any sizes) parses.
  absl::StatusOr<JobSpec> job = ParseJobSpec(R"({"name": "j", "model": {
      "params": [{"name": "fc1.weight", "shape": [8, 4]},
                 {"name": "fc1.bias", "shape": [8]},
                 {"name": "fc2.weight", "shape": [2, 8]},
                 {"name": "fc2.bias", "shape": [2]}]},
      "workload": {"kind": "regression"}})");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->workload.kind, WorkloadKind::kRegression);
}

struct BadCase {
  std::string json;
  std::string message;
};

class JobSpecBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobSpecBadInputTest, FailsWithOneLineNamingTheField) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(GetParam().json);
  ASSERT_FALSE(spec.ok()) << GetParam().json;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr(GetParam().message));
  EXPECT_EQ(std::string(spec.status().message()).find('\n'), std::string::npos);
}

#define M R"("model": {"preset": "gpt2-small"})"

INSTANTIATE_TEST_SUITE_P(
    Cases, JobSpecBadInputTest,
    ::testing::Values(
        BadCase{"{not json", "not valid json"},
        BadCase{"[1, 2]", "job spec must be an object"},
        BadCase{R"({"model": {"preset": "gpt2-small"}})", "name is missing"},
        BadCase{R"({"name": 7, )" M "}", "name must be a string"},
        BadCase{R"({"name": "a b", )" M "}", "name may hold only"},
        BadCase{R"({"name": "j"})", "model is missing"},
        BadCase{R"({"name": "j", "model": {"preset": "gpt5"}})",
                "model.preset 'gpt5' is unknown"},
        BadCase{R"({"name": "j", "model": {}})", "exactly one of"},
        BadCase{R"({"name": "j", "model": {"params": [{"name": "x"}]}})",
                "model: "},
        BadCase{R"({"name": "j", )" M R"(, "world": {"min": 5, "max": 4}})",
                "world.min (5) is greater than world.max (4)"},
        BadCase{R"({"name": "j", )" M
                R"(, "world": {"instances": 3, "min": 2, "max": 4}})",
                "world.instances (3) does not divide world.max (4)"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"max": "4"}})",
                "world.max must be an integer"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"max": 4.5}})",
                "world.max must be an integer"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"instances": 0}})",
                "world.instances must be in [1, 65536]"},
        BadCase{R"({"name": "j", )" M R"(, "world": 4})",
                "world must be an object"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"resize": "keep"}})",
                "world.resize 'keep' is unknown; known: keep_d, keep_i"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"resize": 1}})",
                "world.resize must be a string"},
        BadCase{R"({"name": "j", )" M R"(, "lease_timeout_ms": -1})",
                "lease_timeout_ms must be in"},
        BadCase{R"({"name": "j", )" M
                R"(, "lease_timeout_ms": 1000, "heartbeat_interval_ms": 1000})",
                "heartbeat_interval_ms must be in [10, 999]"},
        BadCase{R"({"name": "j", )" M R"(, "workload": {"kind": "train"}})",
                "workload.kind 'train' is unknown"},
        BadCase{R"({"name": "j", )" M R"(, "workload": {"steps": -3}})",
                "workload.steps must be in"},
        BadCase{R"({"name": "j", )" M R"(, "workload": {"global_batch": 0}})",
                "workload.global_batch must be in"},
        BadCase{
            R"({"name": "j", )" M
            R"(, "workload": {"kind": "trainer", "trainer_timeout_ms": 5}})",
            "workload.trainer_timeout_ms must be in [1000, 86400000]"},
        BadCase{R"({"name": "j", )" M R"(, "optimizer": {"lr": 0}})",
                "optimizer.lr must be > 0"},
        BadCase{R"({"name": "j", )" M R"(, "optimizer": {"beta1": 1.0}})",
                "optimizer.beta1 must be in"},
        BadCase{R"({"name": "j", )" M R"(, "optimizer": {"eps": "x"}})",
                "optimizer.eps must be a number"},
        BadCase{R"({"name": "j", )" M
                R"(, "optimizer": {"lr_schedule": {"kind": "step"}}})",
                "optimizer.lr_schedule.kind must be constant, cosine or "
                "linear, not 'step'"},
        BadCase{R"({"name": "j", )" M
                R"(, "optimizer": {"lr_schedule": {"kind": "cosine",)"
                R"( "warmup_steps": 10, "decay_steps": 10}}})",
                "optimizer.lr_schedule.decay_steps (10) must be greater"},
        BadCase{R"({"name": "j", )" M
                R"(, "optimizer": {"lr": 0.1, "lr_schedule": {"kind":)"
                R"( "linear", "decay_steps": 10, "min_lr": 0.2}}})",
                "optimizer.lr_schedule.min_lr (0.2) must be in"},
        BadCase{R"({"name": "j", )" M
                R"(, "optimizer": {"lr_schedule": {"min_lr": 0.0001}}})",
                "decay_steps and min_lr apply to cosine and linear only"},
        BadCase{R"({"name": "j", )" M
                R"(, "optimizer": {"lr_schedule": {"warmup": 3}}})",
                "optimizer.lr_schedule.warmup"},
        BadCase{R"({"name": "j", )" M R"(, "layout": {"bucket_size": -1}})",
                "layout.bucket_size must be in"},
        BadCase{R"({"name": "j", )" M
                R"(, "layout": {"grad_reduce_in_fp32": 1}})",
                "layout.grad_reduce_in_fp32 must be true or false"},
        BadCase{R"({"name": "j", )" M R"(, "layout": {"expert_parallel": 3}})",
                "layout.expert_parallel (3) does not divide"},
        BadCase{R"({"name": "j", )" M R"(, "checkpoint": {"every_steps": 10}})",
                "checkpoint.every_steps > 0 needs checkpoint.dir"},
        BadCase{R"({"name": "j", )" M R"(, "wrold": {}})",
                "unknown field wrold"},
        BadCase{R"({"name": "j", )" M R"(, "world": {"maximum": 4}})",
                "unknown field world.maximum"},
        BadCase{R"({"name": "j", )" M
                R"(, "workload": {"kind": "regression"}})",
                "regression workload: the model must be the two-layer mlp"},
        BadCase{R"({"name": "j", "model": {"params": [)"
                R"({"name": "fc1.weight", "shape": [8, 4]},)"
                R"({"name": "fc1.bias", "shape": [8]},)"
                R"({"name": "fc2.weight", "shape": [2, 8]},)"
                R"({"name": "fc2.bias", "shape": [3]}]},)"
                R"("workload": {"kind": "regression"}})",
                "regression workload: param 'fc2.bias' does not match"}));

#undef M

}  // namespace
}  // namespace zshard::job
