// SQLite schema, load and batched writes of the coordinator state.
#include "server/store/sqlite_state_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "server/store/store_json.h"

namespace zshard::server {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS job (
  id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL,
  spec_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (
  worker_id TEXT PRIMARY KEY, name TEXT NOT NULL, token TEXT NOT NULL,
  address TEXT NOT NULL, labels_json TEXT NOT NULL, device_json TEXT NOT NULL,
  state TEXT NOT NULL, rank INTEGER NOT NULL, join_seq INTEGER NOT NULL,
  epoch INTEGER NOT NULL, step INTEGER NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS epochs (
  epoch INTEGER PRIMARY KEY, base_epoch INTEGER NOT NULL,
  status TEXT NOT NULL, world INTEGER NOT NULL, instances INTEGER NOT NULL,
  plan_hash TEXT NOT NULL, resume_step INTEGER NOT NULL,
  slots_json TEXT NOT NULL, moves_json TEXT NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL,
  epoch INTEGER NOT NULL, kind TEXT NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
  step INTEGER PRIMARY KEY, dir TEXT NOT NULL, committed_ms INTEGER NOT NULL,
  manifest_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rendezvous (
  epoch INTEGER NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (epoch, key));
)sql";

nlohmann::json ParseOrEmpty(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

std::map<std::string, std::string> LabelsFrom(const nlohmann::json& j) {
  std::map<std::string, std::string> labels;
  if (!j.is_object()) return labels;
  for (const auto& item : j.items()) {
    if (item.value().is_string()) labels[item.key()] = item.value();
  }
  return labels;
}

// Columns of an epoch row without moves_json (see ReadEpoch).
constexpr char kEpochColumns[] =
    "epoch, base_epoch, status, world, instances, plan_hash, resume_step, "
    "slots_json, reason, extra_json";

StoredEpoch ReadEpoch(SqliteStmt& q) {
  StoredEpoch e;
  e.plan.epoch = q.Int(0);
  e.plan.base_epoch = q.Int(1);
  e.status = ParseEpochStatus(q.Text(2));
  e.plan.world = static_cast<int>(q.Int(3));
  e.plan.instances = static_cast<int>(q.Int(4));
  e.plan.plan_hash = q.Text(5);
  e.plan.resume_step = q.Int(6);
  e.plan.slots = SlotsFromJson(q.Text(7));
  e.plan.reason = q.Text(8);
  EpochExtraFromJson(q.Text(9), &e.plan);
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& state_dir) {
  if (state_dir.empty()) {
    return absl::InvalidArgumentError("state dir is missing");
  }
  if (mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create state dir '", state_dir, "': ", std::strerror(errno)));
  }
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<DirLock> lock,
                          DirLock::Acquire(state_dir));
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db,
                          SqliteDb::Open(state_dir + "/coordinator.db"));
  ZSHARD_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL;"));
  // WAL with NORMAL sync survives a killed process (kill -9); only an OS
  // crash may lose the last transactions.
  ZSHARD_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL;"));
  ZSHARD_RETURN_IF_ERROR(db->Exec(kSchema));
  // Stores written before epochs had extra fields gain the column.
  ZSHARD_ASSIGN_OR_RETURN(
      auto has_extra,
      db->Prepare("SELECT COUNT(*) FROM pragma_table_info('epochs') WHERE "
                  "name = 'extra_json'"));
  ZSHARD_ASSIGN_OR_RETURN(bool row, has_extra->Step());
  if (row && has_extra->Int(0) == 0) {
    ZSHARD_RETURN_IF_ERROR(db->Exec(
        "ALTER TABLE epochs ADD COLUMN extra_json TEXT NOT NULL DEFAULT '{}'"));
  }
  return std::unique_ptr<SqliteStateStore>(
      new SqliteStateStore(std::move(lock), std::move(db)));
}

absl::StatusOr<StoredState> SqliteStateStore::Load() {
  StoredState state;
  ZSHARD_ASSIGN_OR_RETURN(auto job,
                          db_->Prepare("SELECT name, spec_json FROM job"));
  ZSHARD_ASSIGN_OR_RETURN(bool row, job->Step());
  if (row) {
    state.job_name = job->Text(0);
    state.job_spec_json = job->Text(1);
  }
  ZSHARD_ASSIGN_OR_RETURN(
      auto members,
      db_->Prepare("SELECT worker_id, name, token, address, labels_json, "
                   "device_json, state, rank, join_seq, epoch, step, reason "
                   "FROM members ORDER BY join_seq"));
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, members->Step());
    if (!more) break;
    Member m;
    m.worker_id = members->Text(0);
    m.name = members->Text(1);
    m.token = members->Text(2);
    m.address = members->Text(3);
    m.labels = LabelsFrom(ParseOrEmpty(members->Text(4)));
    nlohmann::json dev = ParseOrEmpty(members->Text(5));
    if (dev.is_object()) {
      m.device.kind = FieldOr(dev, "kind", "");
      m.device.model = FieldOr(dev, "model", "");
      m.device.memory_bytes = FieldOr(dev, "memory_bytes", int64_t{0});
      m.device.count = FieldOr(dev, "count", 0);
    }
    m.state = ParseMemberState(members->Text(6));
    m.rank = static_cast<int>(members->Int(7));
    m.join_seq = members->Int(8);
    m.epoch = members->Int(9);
    m.step = members->Int(10);
    m.reason = members->Text(11);
    state.members.push_back(std::move(m));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      auto epochs,
      db_->Prepare(absl::StrCat(
          "SELECT ", kEpochColumns,
          ", moves_json FROM epochs WHERE epoch >= COALESCE((SELECT "
          "MAX(epoch) FROM epochs WHERE status = 'stable'), (SELECT "
          "MAX(epoch) FROM epochs WHERE status IN ('committed', 'broken')), "
          "0) ORDER BY epoch")));
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, epochs->Step());
    if (!more) break;
    StoredEpoch e = ReadEpoch(*epochs);
    e.plan.moves = MovesFromJson(epochs->Text(10));
    state.epochs.push_back(std::move(e));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      auto history,
      db_->Prepare(absl::StrCat("SELECT ", kEpochColumns,
                                " FROM (SELECT * FROM epochs ORDER BY epoch "
                                "DESC LIMIT ?) ORDER BY epoch")));
  history->Bind(1, int64_t{kHistoryEpochs});
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, history->Step());
    if (!more) break;
    state.history.push_back(ReadEpoch(*history));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      auto checkpoints,
      db_->Prepare("SELECT manifest_json FROM checkpoints ORDER BY step"));
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, checkpoints->Step());
    if (!more) break;
    CheckpointRecord c;
    if (CheckpointFromJson(checkpoints->Text(0), &c)) {
      state.checkpoints.push_back(std::move(c));
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(auto meta,
                          db_->Prepare("SELECT key, value FROM meta"));
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, meta->Step());
    if (!more) break;
    state.meta[meta->Text(0)] = meta->Int(1);
  }
  return state;
}

absl::Status SqliteStateStore::SaveJob(const std::string& name,
                                       const std::string& spec_json) {
  ZSHARD_ASSIGN_OR_RETURN(auto stmt, db_->Prepare("SELECT name FROM job"));
  ZSHARD_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (row && stmt->Text(0) != name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir holds job '", stmt->Text(0), "', not '", name, "'"));
  }
  ZSHARD_ASSIGN_OR_RETURN(
      auto put, db_->Prepare("INSERT OR REPLACE INTO job (id, name, spec_json) "
                             "VALUES (1, ?, ?)"));
  put->Bind(1, name);
  put->Bind(2, spec_json);
  return put->Run();
}

absl::Status SqliteStateStore::Apply(const StoreWrite& write) {
  ZSHARD_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  absl::Status s = ApplyInTransaction(write);
  if (!s.ok()) {
    db_->Exec("ROLLBACK").IgnoreError();
    return s;
  }
  return db_->Exec("COMMIT");
}

absl::Status SqliteStateStore::ApplyInTransaction(const StoreWrite& write) {
  if (!write.members.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt, db_->Prepare("INSERT OR REPLACE INTO members VALUES "
                                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    for (const Member& m : write.members) {
      nlohmann::json dev = {{"kind", m.device.kind},
                            {"model", m.device.model},
                            {"memory_bytes", m.device.memory_bytes},
                            {"count", m.device.count}};
      stmt->Bind(1, m.worker_id);
      stmt->Bind(2, m.name);
      stmt->Bind(3, m.token);
      stmt->Bind(4, m.address);
      stmt->Bind(5, nlohmann::json(m.labels).dump());
      stmt->Bind(6, dev.dump());
      stmt->Bind(7, MemberStateName(m.state));
      stmt->Bind(8, int64_t{m.rank});
      stmt->Bind(9, m.join_seq);
      stmt->Bind(10, m.epoch);
      stmt->Bind(11, m.step);
      stmt->Bind(12, m.reason);
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  if (!write.deleted_members.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt, db_->Prepare("DELETE FROM members WHERE worker_id = ?"));
    for (const std::string& id : write.deleted_members) {
      stmt->Bind(1, id);
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  if (!write.epochs.empty()) {
    // An upsert that keeps the stored moves when the batch says they did
    // not change (moves_json bound to NULL).
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt,
        db_->Prepare(
            "INSERT INTO epochs (epoch, base_epoch, status, world, instances, "
            "plan_hash, resume_step, slots_json, moves_json, reason, "
            "extra_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, '[]'), "
            "?, ?) ON CONFLICT(epoch) DO UPDATE SET base_epoch = "
            "excluded.base_epoch, status = excluded.status, world = "
            "excluded.world, instances = excluded.instances, plan_hash = "
            "excluded.plan_hash, resume_step = excluded.resume_step, "
            "slots_json = excluded.slots_json, moves_json = CASE WHEN ?12 "
            "THEN epochs.moves_json ELSE excluded.moves_json END, reason = "
            "excluded.reason, extra_json = excluded.extra_json"));
    for (const StoredEpoch& e : write.epochs) {
      const EpochPlan& p = e.plan;
      stmt->Bind(1, p.epoch);
      stmt->Bind(2, p.base_epoch);
      stmt->Bind(3, EpochStatusName(e.status));
      stmt->Bind(4, int64_t{p.world});
      stmt->Bind(5, int64_t{p.instances});
      stmt->Bind(6, p.plan_hash);
      stmt->Bind(7, p.resume_step);
      stmt->Bind(8, SlotsJson(p.slots));
      if (e.moves_unchanged) {
        stmt->BindNull(9);
      } else {
        stmt->Bind(9, MovesJson(p.moves));
      }
      stmt->Bind(10, p.reason);
      stmt->Bind(11, EpochExtraJson(p));
      stmt->Bind(12, int64_t{e.moves_unchanged ? 1 : 0});
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  if (!write.checkpoints.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt, db_->Prepare("INSERT OR REPLACE INTO checkpoints (step, "
                                "dir, committed_ms, manifest_json) VALUES "
                                "(?, ?, ?, ?)"));
    for (const CheckpointRecord& c : write.checkpoints) {
      stmt->Bind(1, c.step);
      stmt->Bind(2, c.dir);
      stmt->Bind(3, c.committed_ms);
      stmt->Bind(4, CheckpointJson(c));
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  if (!write.meta.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt, db_->Prepare("INSERT OR REPLACE INTO meta VALUES (?, ?)"));
    for (const auto& [key, value] : write.meta) {
      stmt->Bind(1, key);
      stmt->Bind(2, value);
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  if (!write.events.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(
        auto stmt, db_->Prepare("INSERT INTO events (id, time_ms, epoch, kind, "
                                "reason) VALUES (?, ?, ?, ?, ?)"));
    for (const Event& e : write.events) {
      // The event log's seq is the row id, so numbering survives restarts
      // (NULL: the next id).
      if (e.seq > 0) {
        stmt->Bind(1, e.seq);
      } else {
        stmt->BindNull(1);
      }
      stmt->Bind(2, e.time_ms);
      stmt->Bind(3, e.epoch);
      stmt->Bind(4, e.kind);
      stmt->Bind(5, e.reason);
      ZSHARD_RETURN_IF_ERROR(stmt->Run());
      stmt->Reset();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> SqliteStateStore::RecentEvents(int limit) {
  ZSHARD_ASSIGN_OR_RETURN(
      auto stmt,
      db_->Prepare("SELECT time_ms, epoch, kind, reason, id FROM (SELECT * "
                   "FROM "
                   "events ORDER BY id DESC LIMIT ?) ORDER BY id"));
  stmt->Bind(1, int64_t{limit});
  std::vector<Event> events;
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) break;
    events.push_back(Event{stmt->Int(0), stmt->Int(1), stmt->Text(2),
                           stmt->Text(3), stmt->Int(4)});
  }
  return events;
}

absl::Status SqliteStateStore::PutRendezvous(int64_t epoch,
                                             const std::string& key,
                                             const std::string& value) {
  ZSHARD_ASSIGN_OR_RETURN(
      auto put, db_->Prepare("INSERT OR REPLACE INTO rendezvous (epoch, key, "
                             "value) VALUES (?, ?, ?)"));
  put->Bind(1, epoch);
  put->Bind(2, key);
  put->Bind(3, value);
  return put->Run();
}

absl::StatusOr<RendezvousEntries> SqliteStateStore::LoadRendezvous() {
  ZSHARD_ASSIGN_OR_RETURN(
      auto stmt, db_->Prepare("SELECT epoch, key, value FROM rendezvous"));
  RendezvousEntries entries;
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) break;
    entries[stmt->Int(0)][stmt->Text(1)] = stmt->Text(2);
  }
  return entries;
}

absl::Status SqliteStateStore::DropRendezvousBefore(int64_t epoch) {
  ZSHARD_ASSIGN_OR_RETURN(
      auto del, db_->Prepare("DELETE FROM rendezvous WHERE epoch < ?"));
  del->Bind(1, epoch);
  return del->Run();
}

}  // namespace zshard::server
