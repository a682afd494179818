// Checkpoint and reshard value <-> proto conversions.
#include "server/service/checkpoint_convert.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/manifest.h"
#include "common/checkpoint/verify.h"
#include "common/job/job_slot.h"
#include "common/status.h"

namespace zshard::server {

void ToProto(const CheckpointRecord& c, v1::CheckpointManifest* out) {
  out->set_job(c.job);
  out->set_step(c.step);
  out->set_adam_step(c.adam_step);
  out->set_epoch(c.epoch);
  out->set_world(c.world);
  out->set_instances(c.instances);
  out->set_dir(c.dir);
  for (const CheckpointFileInfo& f : c.files) {
    v1::CheckpointFile* pf = out->add_files();
    pf->set_path(f.path);
    pf->set_rank(f.rank);
    pf->set_bytes(f.bytes);
    pf->set_checksum(f.checksum);
    pf->set_slot(f.slot);
    for (const ParamRangeInfo& r : f.ranges) {
      v1::ParamRange* pr = pf->add_ranges();
      pr->set_param_index(r.param_index);
      pr->set_expert_rank(r.expert_rank);
      pr->set_begin(r.begin);
      pr->set_end(r.end);
    }
  }
  for (const std::string& n : c.param_names) out->add_param_names(n);
  for (int64_t n : c.param_numels) out->add_param_numels(n);
  out->set_committed_ms(c.committed_ms);
  out->set_bytes(c.bytes);
  out->set_tensor(c.tensor);
  out->set_pipeline(c.pipeline);
  out->set_context(c.context);
  for (int n : c.slot_params) out->add_slot_params(n);
}

CheckpointFileInfo FromProto(const v1::CheckpointFile& f) {
  CheckpointFileInfo info;
  info.path = f.path();
  info.rank = f.rank();
  info.bytes = f.bytes();
  info.checksum = f.checksum();
  info.slot = f.slot();
  for (const v1::ParamRange& r : f.ranges()) {
    info.ranges.push_back(
        ParamRangeInfo{r.param_index(), r.expert_rank(), r.begin(), r.end()});
  }
  return info;
}

CheckpointRecord FromProto(const v1::CheckpointManifest& m) {
  CheckpointRecord c;
  c.job = m.job();
  c.step = m.step();
  c.adam_step = m.adam_step();
  c.epoch = m.epoch();
  c.world = m.world();
  c.instances = m.instances();
  c.dir = m.dir();
  for (const v1::CheckpointFile& f : m.files()) c.files.push_back(FromProto(f));
  c.param_names.assign(m.param_names().begin(), m.param_names().end());
  c.param_numels.assign(m.param_numels().begin(), m.param_numels().end());
  c.committed_ms = m.committed_ms();
  c.bytes = m.bytes();
  c.tensor = std::max(1, m.tensor());
  c.pipeline = std::max(1, m.pipeline());
  c.context = std::max(1, m.context());
  c.slot_params.assign(m.slot_params().begin(), m.slot_params().end());
  return c;
}

CheckpointReport FromProto(const v1::ReportCheckpointRequest& req) {
  CheckpointReport r;
  r.epoch = req.epoch();
  r.step = req.step();
  r.adam_step = req.adam_step();
  r.dir = req.dir();
  r.file = FromProto(req.file());
  r.error = req.error();
  return r;
}

void ToProto(const ReshardRecord& r, v1::Reshard* out) {
  out->set_epoch(r.epoch);
  out->set_base_epoch(r.base_epoch);
  out->set_reason(r.reason);
  out->set_world_before(r.world_before);
  out->set_world_after(r.world_after);
  out->set_instances(r.instances);
  v1::MoveSummary* s = out->mutable_summary();
  s->set_moves(r.moves);
  s->set_bytes_moved(r.bytes_moved);
  s->set_lower_bound_bytes(r.lower_bound_bytes);
  s->set_bytes_from_checkpoint(r.bytes_from_checkpoint);
  s->set_bytes_same_node(r.bytes_same_node);
  out->set_restored_step(r.restored_step < 0 ? 0 : r.restored_step);
  out->set_proposed_ms(r.proposed_ms);
  out->set_duration_ms(r.duration_ms);
  out->set_outcome(r.outcome);
}

absl::Status WriteManifestFile(const CheckpointRecord& record) {
  v1::CheckpointManifest m;
  ToProto(record, &m);
  return checkpoint::WriteManifest(m);
}

absl::StatusOr<CheckpointRecord> LoadRestoreCheckpoint(
    const std::string& dir, const job::JobSpec& spec) {
  ZSHARD_ASSIGN_OR_RETURN(v1::CheckpointManifest m,
                          checkpoint::ReadManifest(dir));
  absl::Status valid = checkpoint::ValidateSlotsManifest(m, spec.parallel,
                                                         job::SlotModels(spec));
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", dir, "' does not fit the job: ", valid.message()));
  }
  CheckpointRecord c = FromProto(m);
  for (const CheckpointFileInfo& f : c.files) {
    for (const ParamRangeInfo& r : f.ranges) {
      if (r.expert_rank >= spec.layout.expert_parallel) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", dir, "' file '", f.path, "' has expert rank ",
            r.expert_rank, " but the job's expert_parallel is ",
            spec.layout.expert_parallel));
      }
    }
  }
  absl::Status covered =
      CheckSlotsCoverage(c, job::SlotModels(spec), spec.layout.expert_parallel);
  if (!covered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", dir, "' is incomplete: ", covered.message()));
  }
  // Every file whole before any worker is involved: a damaged file found
  // by a worker after the commit would stall the job's first epoch.
  std::vector<checkpoint::ExpectedFile> expected;
  for (const CheckpointFileInfo& f : c.files) {
    expected.push_back({f.path, f.bytes, f.checksum});
  }
  ZSHARD_RETURN_IF_ERROR(checkpoint::VerifyFiles(dir, expected));
  char resolved[PATH_MAX];
  c.dir =
      realpath(dir.c_str(), resolved) != nullptr ? std::string(resolved) : dir;
  return c;
}

}  // namespace zshard::server
