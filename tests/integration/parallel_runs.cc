// Shared runs of the model-parallel synthetic job.
#include "tests/integration/parallel_runs.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic_expect.h"
#include "tests/integration/parallel_reference.h"

namespace zshard::testing {

ElasticJob ParallelJob() {
  ElasticJob job;
  job.name = "tp2pp2";
  job.tensor = 2;
  job.pipeline = 2;
  job.instances = 2;
  job.min_world = 4;
  job.max_world = 8;
  job.steps = 40;
  job.clip_grad_norm = 0.05;
  return job;
}

void ExpectParallelMasters(ElasticRun& run, int world) {
  auto spec = run.job().Spec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto checks =
      CheckParallelDump(run.dump_dir(), *spec, world, run.job().steps);
  ASSERT_TRUE(checks.ok()) << checks.status() << "\n" << run.Diagnostics();
  for (size_t s = 0; s < checks->size(); ++s) {
    EXPECT_TRUE((*checks)[s].ok())
        << "slot " << s << ": " << (*checks)[s].ToString();
  }
}

absl::StatusOr<std::vector<Masters>> UndisturbedMasters(const ElasticJob& job,
                                                        int world) {
  ElasticRun run(job);
  ZSHARD_RETURN_IF_ERROR(run.Start());
  const std::vector<std::string> names = WorkerNames(world);
  ZSHARD_RETURN_IF_ERROR(run.StartWorkers(names));
  for (const auto& [name, rc] : run.WaitForExits(names, kExitMs)) {
    if (rc != 0) {
      return absl::InternalError(
          absl::StrCat(name, " exited ", rc, "\n", run.Diagnostics()));
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(const job::JobSpec spec, job.Spec());
  return LoadParallelDump(run.dump_dir(), spec);
}

void ExpectSameMasters(const std::vector<Masters>& got,
                       const std::vector<Masters>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_TRUE(got[s] == want[s])
        << "slot " << s << ": " << what << " differs by up to "
        << MaxDifference(got[s], want[s]);
  }
}

}  // namespace zshard::testing
