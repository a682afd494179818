// Checkpoint steps: write the rank file, then report it.

#include "client/worker/train/step_checkpoint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "common/logging.h"

namespace zshard::worker {

bool IsCheckpointStep(const job::CheckpointSpec& spec, int instance,
                      int64_t step) {
  return spec.every_steps > 0 && !spec.dir.empty() && instance == 0 &&
         step > 0 && step % spec.every_steps == 0;
}

absl::Status WriteStepCheckpoint(const job::CheckpointSpec& spec,
                                 const EpochInfo& epoch,
                                 const engine::StepEngine& engine,
                                 const Runner::CheckpointReporter& report,
                                 const Runner::FailureReporter& failed) {
  const int64_t step = engine.step();
  const std::string dir = checkpoint::StepDir(spec.dir, step);
  absl::StatusOr<checkpoint::RankFileInfo> file = checkpoint::WriteRankFile(
      engine.buffers(), dir, epoch.rank, step, engine.adam_step());
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
