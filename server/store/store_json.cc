// JSON encodings of slots, moves, epoch extras and checkpoint records.
#include "server/store/store_json.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace zshard::server {
namespace {

using nlohmann::json;

json Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

std::map<std::string, std::string> LabelsFrom(const json& j) {
  std::map<std::string, std::string> labels;
  if (!j.is_object()) return labels;
  for (const auto& item : j.items()) {
    if (item.value().is_string()) labels[item.key()] = item.value();
  }
  return labels;
}

template <typename T>
T Get(const json& a, size_t i, T fallback) {
  if (!a.is_array() || i >= a.size()) return fallback;
  const json& v = a[i];
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else {
    return v.is_number() ? v.get<T>() : fallback;
  }
}

}  // namespace

std::string SlotsJson(const std::vector<Slot>& slots) {
  json a = json::array();
  for (const Slot& s : slots) {
    a.push_back({{"worker_id", s.worker_id},
                 {"name", s.name},
                 {"address", s.address},
                 {"rank", s.rank},
                 {"instance", s.instance},
                 {"shard_rank", s.shard_rank},
                 {"labels", s.labels}});
  }
  return a.dump();
}

std::vector<Slot> SlotsFromJson(const std::string& text) {
  json a = Parse(text);
  std::vector<Slot> slots;
  if (!a.is_array()) return slots;
  for (const json& j : a) {
    if (!j.is_object()) continue;
    Slot s;
    s.worker_id = FieldOr(j, "worker_id", "");
    s.name = FieldOr(j, "name", "");
    s.address = FieldOr(j, "address", "");
    s.rank = FieldOr(j, "rank", -1);
    s.instance = FieldOr(j, "instance", -1);
    s.shard_rank = FieldOr(j, "shard_rank", -1);
    s.labels = LabelsFrom(FieldOr(j, "labels", json::object()));
    slots.push_back(std::move(s));
  }
  return slots;
}

std::string MovesJson(const std::vector<plan::Move>& moves) {
  json a = json::array();
  for (const plan::Move& m : moves) {
    const bool member = m.source == plan::MoveSource::kMember;
    a.push_back({member ? m.source_rank : -1, m.dest_rank, m.dest_buffer,
                 m.dest_bucket, m.dest_offset_in_bucket, m.elements(),
                 m.source_member, m.dest_member, m.param_index, m.expert_rank,
                 m.begin, m.end, m.checkpoint_file});
  }
  return a.dump();
}

std::vector<plan::Move> MovesFromJson(const std::string& text) {
  json a = Parse(text);
  std::vector<plan::Move> moves;
  if (!a.is_array()) return moves;
  moves.reserve(a.size());
  for (const json& j : a) {
    if (!j.is_array() || j.size() < 6) continue;
    plan::Move m;
    m.source_rank = Get<int>(j, 0, -1);
    m.source = m.source_rank >= 0 ? plan::MoveSource::kMember
                                  : plan::MoveSource::kCheckpoint;
    m.dest_rank = Get<int>(j, 1, 0);
    m.dest_buffer = Get<int>(j, 2, 0);
    m.dest_bucket = Get<int>(j, 3, 0);
    m.dest_offset_in_bucket = Get<int64_t>(j, 4, 0);
    const int64_t length = Get<int64_t>(j, 5, 0);
    m.source_member = Get<std::string>(j, 6, "");
    m.dest_member = Get<std::string>(j, 7, "");
    m.param_index = Get<int>(j, 8, 0);
    m.expert_rank = Get<int>(j, 9, 0);
    m.begin = Get<int64_t>(j, 10, 0);
    m.end = Get<int64_t>(j, 11, m.begin + length);
    m.checkpoint_file = Get<std::string>(j, 12, "");
    moves.push_back(std::move(m));
  }
  return moves;
}

std::string EpochExtraJson(const EpochPlan& p) {
  const MoveSummary& s = p.summary;
  json j = {{"summary",
             {s.moves, s.bytes_moved, s.lower_bound_bytes,
              s.bytes_from_checkpoint, s.bytes_same_node}},
            {"resume_adam_step", p.resume_adam_step},
            {"repeat_through", p.repeat_through},
            {"finish_pending_step", p.finish_pending_step},
            {"commit_values", p.commit_values},
            {"world_before", p.world_before},
            {"proposed_ms", p.proposed_ms},
            {"committed_ms", p.committed_ms},
            {"duration_ms", p.duration_ms},
            {"spares", p.spares}};
  if (p.restore.active()) {
    j["restore"] = {{"step", p.restore.step},
                    {"dir", p.restore.dir},
                    {"adam_step", p.restore.adam_step}};
  }
  return j.dump();
}

void EpochExtraFromJson(const std::string& text, EpochPlan* p) {
  json j = Parse(text);
  if (!j.is_object()) return;
  json s = FieldOr(j, "summary", json::array());
  p->summary.moves = Get<int>(s, 0, 0);
  p->summary.bytes_moved = Get<int64_t>(s, 1, 0);
  p->summary.lower_bound_bytes = Get<int64_t>(s, 2, 0);
  p->summary.bytes_from_checkpoint = Get<int64_t>(s, 3, 0);
  p->summary.bytes_same_node = Get<int64_t>(s, 4, 0);
  p->resume_adam_step = FieldOr(j, "resume_adam_step", int64_t{0});
  p->repeat_through = FieldOr(j, "repeat_through", int64_t{0});
  p->finish_pending_step = FieldOr(j, "finish_pending_step", false);
  json values = FieldOr(j, "commit_values", json::array());
  p->commit_values.clear();
  for (const json& v : values) {
    if (v.is_number()) p->commit_values.push_back(v.get<double>());
  }
  p->world_before = FieldOr(j, "world_before", 0);
  p->proposed_ms = FieldOr(j, "proposed_ms", int64_t{0});
  p->committed_ms = FieldOr(j, "committed_ms", int64_t{0});
  p->duration_ms = FieldOr(j, "duration_ms", int64_t{0});
  p->spares = FieldOr(j, "spares", p->spares);
  json r = FieldOr(j, "restore", json());
  if (r.is_object()) {
    p->restore.step = FieldOr(r, "step", int64_t{-1});
    p->restore.dir = FieldOr(r, "dir", "");
    p->restore.adam_step = FieldOr(r, "adam_step", int64_t{0});
  }
}

std::string CheckpointJson(const CheckpointRecord& c) {
  json files = json::array();
  for (const CheckpointFileInfo& f : c.files) {
    json ranges = json::array();
    for (const ParamRangeInfo& r : f.ranges) {
      ranges.push_back({r.param_index, r.expert_rank, r.begin, r.end});
    }
    files.push_back({{"path", f.path},
                     {"rank", f.rank},
                     {"bytes", f.bytes},
                     {"checksum", f.checksum},
                     {"ranges", ranges},
                     {"slot", f.slot}});
  }
  return json{{"job", c.job},
              {"step", c.step},
              {"adam_step", c.adam_step},
              {"epoch", c.epoch},
              {"world", c.world},
              {"instances", c.instances},
              {"dir", c.dir},
              {"files", files},
              {"param_names", c.param_names},
              {"param_numels", c.param_numels},
              {"committed_ms", c.committed_ms},
              {"bytes", c.bytes},
              {"tensor", c.tensor},
              {"pipeline", c.pipeline},
              {"context", c.context},
              {"slot_params", c.slot_params}}
      .dump();
}

bool CheckpointFromJson(const std::string& text, CheckpointRecord* c) {
  json j = Parse(text);
  if (!j.is_object() || !j.contains("step")) return false;
  c->job = FieldOr(j, "job", "");
  c->step = FieldOr(j, "step", int64_t{0});
  c->adam_step = FieldOr(j, "adam_step", int64_t{0});
  c->epoch = FieldOr(j, "epoch", int64_t{0});
  c->world = FieldOr(j, "world", 0);
  c->instances = FieldOr(j, "instances", 1);
  c->dir = FieldOr(j, "dir", "");
  c->committed_ms = FieldOr(j, "committed_ms", int64_t{0});
  c->bytes = FieldOr(j, "bytes", int64_t{0});
  c->tensor = FieldOr(j, "tensor", 1);
  c->pipeline = FieldOr(j, "pipeline", 1);
  c->context = FieldOr(j, "context", 1);
  c->slot_params.clear();
  for (const json& n : FieldOr(j, "slot_params", json::array())) {
    if (n.is_number()) c->slot_params.push_back(n.get<int>());
  }
  c->param_names.clear();
  c->param_numels.clear();
  for (const json& n : FieldOr(j, "param_names", json::array())) {
    if (n.is_string()) c->param_names.push_back(n.get<std::string>());
  }
  for (const json& n : FieldOr(j, "param_numels", json::array())) {
    if (n.is_number()) c->param_numels.push_back(n.get<int64_t>());
  }
  c->files.clear();
  for (const json& f : FieldOr(j, "files", json::array())) {
    if (!f.is_object()) continue;
    CheckpointFileInfo info;
    info.path = FieldOr(f, "path", "");
    info.rank = FieldOr(f, "rank", 0);
    info.bytes = FieldOr(f, "bytes", int64_t{0});
    info.checksum = FieldOr(f, "checksum", "");
    info.slot = FieldOr(f, "slot", 0);
    for (const json& r : FieldOr(f, "ranges", json::array())) {
      info.ranges.push_back(ParamRangeInfo{Get<int>(r, 0, 0), Get<int>(r, 1, 0),
                                           Get<int64_t>(r, 2, 0),
                                           Get<int64_t>(r, 3, 0)});
    }
    c->files.push_back(std::move(info));
  }
  return true;
}

MemberState ParseMemberState(const std::string& s) {
  for (MemberState m :
       {MemberState::kJoining, MemberState::kActive, MemberState::kSpare,
        MemberState::kDraining, MemberState::kDead, MemberState::kLeft}) {
    if (s == MemberStateName(m)) return m;
  }
  return MemberState::kDead;
}

EpochStatus ParseEpochStatus(const std::string& s) {
  for (EpochStatus e :
       {EpochStatus::kProposed, EpochStatus::kCommitted, EpochStatus::kStable,
        EpochStatus::kAbandoned, EpochStatus::kBroken}) {
    if (s == EpochStatusName(e)) return e;
  }
  return EpochStatus::kAbandoned;
}

std::string MemberJson(const Member& m) {
  return json{{"worker_id", m.worker_id},
              {"name", m.name},
              {"token", m.token},
              {"address", m.address},
              {"labels", m.labels},
              {"device",
               {{"kind", m.device.kind},
                {"model", m.device.model},
                {"memory_bytes", m.device.memory_bytes},
                {"count", m.device.count}}},
              {"state", MemberStateName(m.state)},
              {"rank", m.rank},
              {"join_seq", m.join_seq},
              {"epoch", m.epoch},
              {"step", m.step},
              {"reason", m.reason}}
      .dump();
}

bool MemberFromJson(const std::string& text, Member* m) {
  json j = Parse(text);
  if (!j.is_object() || !j.contains("worker_id")) return false;
  m->worker_id = FieldOr(j, "worker_id", "");
  m->name = FieldOr(j, "name", "");
  m->token = FieldOr(j, "token", "");
  m->address = FieldOr(j, "address", "");
  m->labels = LabelsFrom(FieldOr(j, "labels", json::object()));
  json dev = FieldOr(j, "device", json::object());
  if (dev.is_object()) {
    m->device.kind = FieldOr(dev, "kind", "");
    m->device.model = FieldOr(dev, "model", "");
    m->device.memory_bytes = FieldOr(dev, "memory_bytes", int64_t{0});
    m->device.count = FieldOr(dev, "count", 0);
  }
  m->state = ParseMemberState(FieldOr(j, "state", ""));
  m->rank = FieldOr(j, "rank", -1);
  m->join_seq = FieldOr(j, "join_seq", int64_t{0});
  m->epoch = FieldOr(j, "epoch", int64_t{0});
  m->step = FieldOr(j, "step", int64_t{0});
  m->reason = FieldOr(j, "reason", "");
  return true;
}

std::string EpochRowJson(const StoredEpoch& e) {
  const EpochPlan& p = e.plan;
  return json{{"epoch", p.epoch},
              {"base_epoch", p.base_epoch},
              {"status", EpochStatusName(e.status)},
              {"world", p.world},
              {"instances", p.instances},
              {"plan_hash", p.plan_hash},
              {"resume_step", p.resume_step},
              {"slots_json", SlotsJson(p.slots)},
              {"reason", p.reason},
              {"extra_json", EpochExtraJson(p)}}
      .dump();
}

bool EpochRowFromJson(const std::string& text, StoredEpoch* e) {
  json j = Parse(text);
  if (!j.is_object() || !j.contains("epoch")) return false;
  EpochPlan& p = e->plan;
  p.epoch = FieldOr(j, "epoch", int64_t{0});
  p.base_epoch = FieldOr(j, "base_epoch", int64_t{0});
  e->status = ParseEpochStatus(FieldOr(j, "status", ""));
  p.world = FieldOr(j, "world", 0);
  p.instances = FieldOr(j, "instances", 0);
  p.plan_hash = FieldOr(j, "plan_hash", "");
  p.resume_step = FieldOr(j, "resume_step", int64_t{0});
  p.slots = SlotsFromJson(FieldOr(j, "slots_json", "[]"));
  p.reason = FieldOr(j, "reason", "");
  EpochExtraFromJson(FieldOr(j, "extra_json", "{}"), &p);
  return true;
}

}  // namespace zshard::server
