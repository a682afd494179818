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
    s.worker_id = j.value("worker_id", "");
    s.name = j.value("name", "");
    s.address = j.value("address", "");
    s.rank = j.value("rank", -1);
    s.instance = j.value("instance", -1);
    s.shard_rank = j.value("shard_rank", -1);
    s.labels = LabelsFrom(j.value("labels", json::object()));
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
  json s = j.value("summary", json::array());
  p->summary.moves = Get<int>(s, 0, 0);
  p->summary.bytes_moved = Get<int64_t>(s, 1, 0);
  p->summary.lower_bound_bytes = Get<int64_t>(s, 2, 0);
  p->summary.bytes_from_checkpoint = Get<int64_t>(s, 3, 0);
  p->summary.bytes_same_node = Get<int64_t>(s, 4, 0);
  p->resume_adam_step = j.value("resume_adam_step", int64_t{0});
  p->finish_pending_step = j.value("finish_pending_step", false);
  json values = j.value("commit_values", json::array());
  p->commit_values.clear();
  for (const json& v : values) {
    if (v.is_number()) p->commit_values.push_back(v.get<double>());
  }
  p->world_before = j.value("world_before", 0);
  p->proposed_ms = j.value("proposed_ms", int64_t{0});
  p->committed_ms = j.value("committed_ms", int64_t{0});
  p->duration_ms = j.value("duration_ms", int64_t{0});
  p->spares = j.value("spares", p->spares);
  json r = j.value("restore", json());
  if (r.is_object()) {
    p->restore.step = r.value("step", int64_t{-1});
    p->restore.dir = r.value("dir", "");
    p->restore.adam_step = r.value("adam_step", int64_t{0});
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
                     {"ranges", ranges}});
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
              {"bytes", c.bytes}}
      .dump();
}

bool CheckpointFromJson(const std::string& text, CheckpointRecord* c) {
  json j = Parse(text);
  if (!j.is_object() || !j.contains("step")) return false;
  c->job = j.value("job", "");
  c->step = j.value("step", int64_t{0});
  c->adam_step = j.value("adam_step", int64_t{0});
  c->epoch = j.value("epoch", int64_t{0});
  c->world = j.value("world", 0);
  c->instances = j.value("instances", 1);
  c->dir = j.value("dir", "");
  c->committed_ms = j.value("committed_ms", int64_t{0});
  c->bytes = j.value("bytes", int64_t{0});
  c->param_names.clear();
  c->param_numels.clear();
  for (const json& n : j.value("param_names", json::array())) {
    if (n.is_string()) c->param_names.push_back(n.get<std::string>());
  }
  for (const json& n : j.value("param_numels", json::array())) {
    if (n.is_number()) c->param_numels.push_back(n.get<int64_t>());
  }
  c->files.clear();
  for (const json& f : j.value("files", json::array())) {
    if (!f.is_object()) continue;
    CheckpointFileInfo info;
    info.path = f.value("path", "");
    info.rank = f.value("rank", 0);
    info.bytes = f.value("bytes", int64_t{0});
    info.checksum = f.value("checksum", "");
    for (const json& r : f.value("ranges", json::array())) {
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
  m->worker_id = j.value("worker_id", "");
  m->name = j.value("name", "");
  m->token = j.value("token", "");
  m->address = j.value("address", "");
  m->labels = LabelsFrom(j.value("labels", json::object()));
  json dev = j.value("device", json::object());
  if (dev.is_object()) {
    m->device.kind = dev.value("kind", "");
    m->device.model = dev.value("model", "");
    m->device.memory_bytes = dev.value("memory_bytes", int64_t{0});
    m->device.count = dev.value("count", 0);
  }
  m->state = ParseMemberState(j.value("state", ""));
  m->rank = j.value("rank", -1);
  m->join_seq = j.value("join_seq", int64_t{0});
  m->epoch = j.value("epoch", int64_t{0});
  m->step = j.value("step", int64_t{0});
  m->reason = j.value("reason", "");
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
  p.epoch = j.value("epoch", int64_t{0});
  p.base_epoch = j.value("base_epoch", int64_t{0});
  e->status = ParseEpochStatus(j.value("status", ""));
  p.world = j.value("world", 0);
  p.instances = j.value("instances", 0);
  p.plan_hash = j.value("plan_hash", "");
  p.resume_step = j.value("resume_step", int64_t{0});
  p.slots = SlotsFromJson(j.value("slots_json", "[]"));
  p.reason = j.value("reason", "");
  EpochExtraFromJson(j.value("extra_json", "{}"), &p);
  return true;
}

}  // namespace zshard::server
