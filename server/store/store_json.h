// JSON encodings of the values the SQLite store keeps in text columns:
// slots, moves, an epoch's extra fields and checkpoint manifests, and of
// the rows the etcd store keeps as one value each (members, epochs). Readers
// accept what older versions wrote (missing fields take their defaults).
#pragma once

#include <string>
#include <vector>

#include "common/plan/moves.h"
#include "server/membership/checkpoint_types.h"
#include "server/membership/types.h"
#include "server/store/state_store.h"

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

// A member row as one object (the SQLite columns as fields).
std::string MemberJson(const Member& member);
// False when `text` is not a member object.
bool MemberFromJson(const std::string& text, Member* member);

// An epoch row without its moves as one object (the SQLite columns as
// fields; slots and extras nested as the text those columns hold).
std::string EpochRowJson(const StoredEpoch& epoch);
// False when `text` is not an epoch object. Leaves plan.moves untouched.
bool EpochRowFromJson(const std::string& text, StoredEpoch* epoch);

MemberState ParseMemberState(const std::string& name);  // unknown: kDead
EpochStatus ParseEpochStatus(const std::string& name);  // unknown: kAbandoned

}  // namespace zshard::server
