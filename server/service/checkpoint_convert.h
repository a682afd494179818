// Conversions between the coordinator's checkpoint and reshard values and
// their zshard.v1 messages (manifest, report, history line).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/job/job_spec.h"
#include "server/membership/checkpoints/checkpoint_registry.h"
#include "server/state/checkpoint_types.h"
#include "zshard/v1/dashboard_service.pb.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::server {

void ToProto(const CheckpointRecord& record, v1::CheckpointManifest* out);
CheckpointRecord FromProto(const v1::CheckpointManifest& manifest);
CheckpointFileInfo FromProto(const v1::CheckpointFile& file);
CheckpointReport FromProto(const v1::ReportCheckpointRequest& req);
void ToProto(const ReshardRecord& record, v1::Reshard* out);

// Writes `record`'s manifest.json into its dir (MembershipOptions::
// write_manifest of the coordinator).
absl::Status WriteManifestFile(const CheckpointRecord& record);

// Reads DIR/manifest.json for `zshard-coordinator --restore DIR` and checks
// it belongs to `spec`'s model and covers every element of it, then
// verifies every rank file's size and checksum (checkpoint::VerifyFiles).
// The record's dir is DIR made absolute. NotFound / DataLoss from reading,
// naming the manifest or the file; InvalidArgument naming the first
// difference.
absl::StatusOr<CheckpointRecord> LoadRestoreCheckpoint(
    const std::string& dir, const job::JobSpec& spec);

}  // namespace zshard::server
