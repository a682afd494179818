// Value type <-> proto conversions.
#include "server/service/proto_convert.h"

namespace zshard::server {

v1::MemberState ToProto(MemberState state) {
  switch (state) {
    case MemberState::kJoining:
      return v1::MEMBER_STATE_JOINING;
    case MemberState::kActive:
      return v1::MEMBER_STATE_ACTIVE;
    case MemberState::kSpare:
      return v1::MEMBER_STATE_SPARE;
    case MemberState::kDraining:
      return v1::MEMBER_STATE_DRAINING;
    case MemberState::kDead:
      return v1::MEMBER_STATE_DEAD;
    case MemberState::kLeft:
      return v1::MEMBER_STATE_LEFT;
  }
  return v1::MEMBER_STATE_UNSPECIFIED;
}

v1::PlanPhase ToProto(PlanPhase phase) {
  switch (phase) {
    case PlanPhase::kProposed:
      return v1::PLAN_PHASE_PROPOSED;
    case PlanPhase::kCommitted:
      return v1::PLAN_PHASE_COMMITTED;
    case PlanPhase::kAbandoned:
      return v1::PLAN_PHASE_ABANDONED;
    case PlanPhase::kStable:
      return v1::PLAN_PHASE_STABLE;
  }
  return v1::PLAN_PHASE_UNSPECIFIED;
}

v1::Command ToProto(Command command) {
  switch (command) {
    case Command::kNone:
      return v1::COMMAND_UNSPECIFIED;
    case Command::kAbort:
      return v1::COMMAND_ABORT;
    case Command::kDrain:
      return v1::COMMAND_DRAIN;
    case Command::kExit:
      return v1::COMMAND_EXIT;
  }
  return v1::COMMAND_UNSPECIFIED;
}

void ToProto(const Slot& slot, v1::Assignment* out) {
  out->set_worker_id(slot.worker_id);
  out->set_name(slot.name);
  out->set_address(slot.address);
  out->set_rank(slot.rank);
  out->set_instance(slot.instance);
  out->set_shard_rank(slot.shard_rank);
  out->mutable_labels()->insert(slot.labels.begin(), slot.labels.end());
}

void ToProto(const plan::Move& move, int index, v1::Move* out) {
  out->set_from_rank(move.source == plan::MoveSource::kMember ? move.source_rank
                                                              : -1);
  out->set_to_rank(move.dest_rank);
  out->set_buffer(move.dest_buffer);
  out->set_bucket(move.dest_bucket);
  out->set_offset(move.dest_offset_in_bucket);
  out->set_length(move.elements());
  out->set_from_worker_id(move.source_member);
  out->set_to_worker_id(move.dest_member);
  out->set_param_index(move.param_index);
  out->set_expert_rank(move.expert_rank);
  out->set_begin(move.begin);
  out->set_end(move.end);
  out->set_checkpoint_file(move.checkpoint_file);
  out->set_index(index);
}

void ToProtoShared(const PlanUpdate& update, v1::PlanUpdate* out) {
  const EpochPlan& p = update.plan;
  out->set_epoch(p.epoch);
  out->set_phase(ToProto(update.phase));
  out->set_world(p.world);
  out->set_instances(p.instances);
  out->set_plan_hash(p.plan_hash);
  out->set_resume_step(p.resume_step);
  out->set_base_epoch(p.base_epoch);
  out->set_reason(p.reason);
  out->set_spares(p.spares);
  out->set_resume_adam_step(p.resume_adam_step);
  out->set_repeat_through(p.repeat_through);
  const MoveSummary& s = p.summary;
  if (!p.moves.empty() || s.lower_bound_bytes > 0) {
    v1::MoveSummary* ps = out->mutable_move_summary();
    ps->set_moves(s.moves);
    ps->set_bytes_moved(s.bytes_moved);
    ps->set_lower_bound_bytes(s.lower_bound_bytes);
    ps->set_bytes_from_checkpoint(s.bytes_from_checkpoint);
    ps->set_bytes_same_node(s.bytes_same_node);
  }
  if (p.restore.active()) {
    v1::CheckpointRef* r = out->mutable_restore();
    r->set_step(p.restore.step);
    r->set_dir(p.restore.dir);
    r->set_adam_step(p.restore.adam_step);
  }
  out->set_finish_pending_step(p.finish_pending_step);
  for (double v : p.commit_values) out->add_commit_values(v);
}

void ToProto(const PlanUpdate& update, v1::PlanUpdate* out) {
  ToProtoShared(update, out);
  const EpochPlan& p = update.plan;
  for (const Slot& s : p.slots) ToProto(s, out->add_assignments());
  out->mutable_moves()->Reserve(static_cast<int>(p.moves.size()));
  for (size_t i = 0; i < p.moves.size(); ++i) {
    ToProto(p.moves[i], static_cast<int>(i), out->add_moves());
  }
}

void ToProto(const ClusterView& view, v1::GetClusterStatusResponse* out) {
  out->set_job(view.job);
  out->set_epoch(view.epoch);
  out->set_state(view.transitioning ? v1::CLUSTER_STATE_TRANSITIONING
                                    : v1::CLUSTER_STATE_STABLE);
  out->set_world(view.world);
  out->set_instances(view.instances);
  out->set_plan_hash(view.plan_hash);
  out->set_pending_epoch(view.pending_epoch);
  out->set_min_world(view.min_world);
  out->set_max_world(view.max_world);
  out->set_target_world(view.target_world);
  out->set_isolated(view.isolated);
  out->set_isolated_ms(view.isolated_ms);
  for (const MemberView& mv : view.members) {
    const Member& m = mv.member;
    v1::MemberStatus* s = out->add_members();
    s->set_name(m.name);
    s->set_worker_id(m.worker_id);
    s->set_state(ToProto(m.state));
    s->set_rank(m.rank);
    s->set_instance(mv.instance);
    s->set_shard_rank(mv.shard_rank);
    s->set_step(m.step);
    s->set_last_heartbeat_ms(mv.ms_since_heartbeat);
    s->mutable_labels()->insert(m.labels.begin(), m.labels.end());
    s->set_address(m.address);
    s->set_suspect(mv.suspect);
    s->set_quarantine(mv.quarantine);
  }
}

DeviceInfo FromProto(const v1::DeviceInfo& device) {
  DeviceInfo d;
  d.kind = device.kind();
  d.model = device.model();
  d.memory_bytes = device.memory_bytes();
  d.count = device.count();
  return d;
}

}  // namespace zshard::server
