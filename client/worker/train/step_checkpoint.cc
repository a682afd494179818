// Checkpoint steps: write the rank file, then report it.

#include "client/worker/train/step_checkpoint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "common/job/job_slot.h"
#include "common/logging.h"
#include "common/status.h"

namespace zshard::worker {

bool IsCheckpointStep(const job::CheckpointSpec& spec, int instance,
                      int64_t step) {
  return spec.every_steps > 0 && !spec.dir.empty() && instance == 0 &&
         step > 0 && step % spec.every_steps == 0;
}

namespace {

// Writes this rank's file into `dir`: a model-parallel job's into
// dir/slot-S/ under its data-parallel rank, the path then relative to
// `dir` and the rank the global one the coordinator checks.
absl::StatusOr<checkpoint::RankFileInfo> WriteFile(
    const job::JobSpec& job, const EpochInfo& epoch,
    const engine::StepEngine& engine, const std::string& dir) {
  if (!job.parallel.model_parallel()) {
    return checkpoint::WriteRankFile(engine.buffers(), dir, epoch.rank,
                                     engine.step(), engine.adam_step());
  }
  ZSHARD_ASSIGN_OR_RETURN(job::SlotJob slot,
                          job::SlotJobOf(job, epoch.world, epoch.rank));
  const std::string sub = absl::StrCat("slot-", slot.slot);
  ZSHARD_ASSIGN_OR_RETURN(
      checkpoint::RankFileInfo file,
      checkpoint::WriteRankFile(engine.buffers(), absl::StrCat(dir, "/", sub),
                                slot.rank, engine.step(), engine.adam_step()));
  file.path = absl::StrCat(sub, "/", file.path);
  file.rank = epoch.rank;
  return file;
}

}  // namespace

absl::Status WriteStepCheckpoint(const job::JobSpec& job,
                                 const EpochInfo& epoch,
                                 const engine::StepEngine& engine,
                                 const Runner::CheckpointReporter& report,
                                 const Runner::FailureReporter& failed) {
  const int64_t step = engine.step();
  const std::string dir = checkpoint::StepDir(job.checkpoint.dir, step);
  absl::StatusOr<checkpoint::RankFileInfo> file =
      WriteFile(job, epoch, engine, dir);
  if (!file.ok()) {
    ZSHARD_LOG_WARN("checkpoint write failed",
                    {{"step", absl::StrCat(step)},
                     {"dir", dir},
                     {"error", std::string(file.status().message())}});
    if (failed) {
      RunnerFailure f;
      f.kind = RunnerFailure::Kind::kCheckpointWrite;
      f.epoch = epoch.epoch;
      f.step = step;
      f.dir = dir;
      f.rank = epoch.rank;
      f.error = std::string(file.status().message());
      failed(f);
    }
    return file.status();
  }
  ZSHARD_LOG_INFO("checkpoint written", {{"step", absl::StrCat(step)},
                                         {"dir", dir},
                                         {"file", file->path},
                                         {"bytes", absl::StrCat(file->bytes)}});
  if (!report) return absl::OkStatus();
  absl::Status reported =
      report(epoch.epoch, step, engine.adam_step(), dir, *file);
  if (!reported.ok()) {
    ZSHARD_LOG_WARN("checkpoint report failed",
                    {{"step", absl::StrCat(step)},
                     {"error", std::string(reported.message())}});
  }
  return reported;
}

}  // namespace zshard::worker
