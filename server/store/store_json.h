// JSON encodings of the values the SQLite store keeps in text columns:
// slots, moves, an epoch's extra fields and checkpoint manifests. Readers
// accept what older versions wrote (missing fields take their defaults).
#pragma once

#include <string>
#include <vector>

#include "common/plan/moves.h"
#include "server/membership/checkpoint_types.h"
#include "server/membership/types.h"

namespace zshard::server {

std::string SlotsJson(const std::vector<Slot>& slots);
std::vector<Slot> SlotsFromJson(const std::string& text);

// A move is a JSON array in zshard.v1.Move's field order (from_rank ...
// checkpoint_file); the 6-field form of older stores is read too (its
// length gives end). A from_rank of -1 reads as a checkpoint source.
std::string MovesJson(const std::vector<plan::Move>& moves);
std::vector<plan::Move> MovesFromJson(const std::string& text);

// The EpochPlan fields without a column of their own (summary, restore,
// resume Adam step, pending-step resolution, history times).
std::string EpochExtraJson(const EpochPlan& plan);
// Sets those fields of `plan` from `text` (unknown or bad text: defaults).
void EpochExtraFromJson(const std::string& text, EpochPlan* plan);

std::string CheckpointJson(const CheckpointRecord& record);
// False when `text` is not a checkpoint record.
bool CheckpointFromJson(const std::string& text, CheckpointRecord* record);

}  // namespace zshard::server
