// Prometheus text for the coordinator's re-shard and checkpoint counters
// (MembershipStats): how many re-shards moved state and how many bytes,
// the latest one's duration, checkpoints committed, the newest one's step
// and its age.
#pragma once

#include <cstdint>
#include <string>

#include "server/membership/membership.h"

namespace zshard::server {

// Families (each with HELP and TYPE lines): zshard_reshards_total,
// zshard_reshard_bytes_total (counters), zshard_last_reshard_seconds,
// zshard_checkpoints_total (counter), zshard_checkpoint_step and
// zshard_checkpoint_age_seconds (now_ms - last_checkpoint_ms, at least 0).
// The last two have no sample before the first committed checkpoint.
// `now_ms` is wall-clock ms since the Unix epoch, like last_checkpoint_ms.
std::string RenderReshardMetrics(const MembershipStats& stats, int64_t now_ms);

}  // namespace zshard::server
