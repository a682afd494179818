// JSON encodings of the values the SQLite store keeps in text columns:
// slots, moves, an epoch's extra fields and checkpoint manifests, and of
// the rows the etcd store keeps as one value each (members, epochs). Readers
// accept what older versions wrote (missing fields take their defaults).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/plan/moves.h"
#include "nlohmann/json.hpp"
#include "server/state/checkpoint_types.h"
#include "server/state/state_store.h"
#include "server/state/types.h"

namespace zshard::server {

// j[field] when `j` is an object holding a value of the fallback's JSON
// type (string, boolean, integer, number; for a json fallback an array,
// an object, or any value when it is null), else `fallback`. The stores'
// readers use it so that a damaged or hand-edited value reads as a default
// instead of throwing.
template <typename T>
T FieldOr(const nlohmann::json& j, const char* field, T fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(field);
  if (it == j.end()) return fallback;
  const nlohmann::json& v = *it;
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    return fallback.is_null() || v.type() == fallback.type() ? v : fallback;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? v.get<bool>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    return v.is_number_integer() ? v.get<T>() : fallback;
  } else {
    static_assert(std::is_floating_point_v<T>, "unsupported field type");
    return v.is_number() ? v.get<T>() : fallback;
  }
}
inline std::string FieldOr(const nlohmann::json& j, const char* field,
                           const char* fallback) {
  return FieldOr<std::string>(j, field, fallback);
}

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
