// Conversions between the membership's value types and zshard.v1 protos,
// for the service adapters.
#pragma once

#include "common/plan/moves.h"
#include "server/membership/membership.h"
#include "server/state/types.h"
#include "zshard/v1/dashboard_service.pb.h"
#include "zshard/v1/types.pb.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::server {

v1::MemberState ToProto(MemberState state);
v1::PlanPhase ToProto(PlanPhase phase);
v1::Command ToProto(Command command);
void ToProto(const Slot& slot, v1::Assignment* out);
// The planner's move as the coordinator sends it: from_rank -1 for a
// checkpoint source, length = end - begin, index = `index` (the move's
// position in its epoch's list).
void ToProto(const plan::Move& move, int index, v1::Move* out);
// Every field of `update` but the per-member ones (assignments and moves),
// move_summary included: what every watcher of the update shares.
void ToProtoShared(const PlanUpdate& update, v1::PlanUpdate* out);
// The whole update: ToProtoShared, every assignment and every move (each
// with its position). WatchPlan never sends this (see plan_watch.h).
void ToProto(const PlanUpdate& update, v1::PlanUpdate* out);
void ToProto(const ClusterView& view, v1::GetClusterStatusResponse* out);
DeviceInfo FromProto(const v1::DeviceInfo& device);

}  // namespace zshard::server
