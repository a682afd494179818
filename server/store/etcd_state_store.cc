// etcd store: key layout, the one-transaction Apply, load at one revision.
#include "server/store/etcd_state_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "server/store/store_json.h"

namespace zshard::server {
namespace {

using nlohmann::json;

std::string Padded(int64_t n, int width) {
  return absl::StrFormat("%0*d", width, n);
}

// The number after the last '/' of `key` (0 when none).
int64_t Tail(const std::string& key) {
  int64_t n = 0;
  (void)absl::SimpleAtoi(key.substr(key.rfind('/') + 1), &n);
  return n;
}

// Calls `call` until it succeeds, fails with something other than
// Unavailable, or `retry_ms` passes: an etcd that cannot be reached
// (restarting, electing its raft leader) is waited for a while, since a
// write that fails leaves the coordinator's memory ahead of its store.
template <typename T, typename F>
absl::StatusOr<T> Retrying(int64_t retry_ms, F call) {
  const absl::Time give_up = absl::Now() + absl::Milliseconds(retry_ms);
  absl::Duration backoff = absl::Milliseconds(50);
  absl::StatusOr<T> r = call();
  while (!r.ok() && r.status().code() == absl::StatusCode::kUnavailable &&
         absl::Now() < give_up) {
    absl::SleepFor(std::min(backoff, give_up - absl::Now()));
    backoff = std::min(backoff * 2, absl::Seconds(1));
    r = call();
  }
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdStateStore>> EtcdStateStore::Open(
    EtcdStateStoreOptions options) {
  while (!options.prefix.empty() && options.prefix.back() == '/') {
    options.prefix.pop_back();
  }
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError("etcd store prefix is empty");
  }
  options.prefix += '/';
  if (options.moves_per_chunk < 1 || options.max_events < 1) {
    return absl::InvalidArgumentError(
        "etcd store moves_per_chunk and max_events must be positive");
  }
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                          EtcdClient::Create(options.client));
  // The coordinator must not serve without its store: reach it now.
  EtcdRange probe;
  probe.key = options.prefix + "job";
  ZSHARD_RETURN_IF_ERROR(client->Range(probe).status());
  return std::unique_ptr<EtcdStateStore>(
      new EtcdStateStore(std::move(options), std::move(client)));
}

absl::StatusOr<EtcdRangeResult> EtcdStateStore::ReadRange(
    const EtcdRange& range) {
  return Retrying<EtcdRangeResult>(options_.retry_ms,
                                   [&] { return client_->Range(range); });
}

absl::StatusOr<EtcdRangeResult> EtcdStateStore::ReadPrefix(
    const std::string& prefix, int64_t revision) {
  return Retrying<EtcdRangeResult>(options_.retry_ms, [&] {
    return client_->RangePrefix(prefix, revision);
  });
}

std::string EtcdStateStore::EpochKey(int64_t epoch) const {
  return absl::StrCat(options_.prefix, "epochs/", Padded(epoch, 20));
}

std::string EtcdStateStore::MovesPrefix(int64_t epoch) const {
  return absl::StrCat(options_.prefix, "moves/", Padded(epoch, 20), "/");
}

void EtcdStateStore::SetFence(std::string key, int64_t create_revision) {
  fence_key_ = std::move(key);
  fence_revision_ = create_revision;
  next_event_seq_ = 0;
}

std::string EtcdStateStore::RendezvousPrefix(int64_t epoch) const {
  return absl::StrCat(options_.prefix, "rendezvous/", Padded(epoch, 20), "/");
}

absl::Status EtcdStateStore::PutRendezvous(int64_t epoch,
                                           const std::string& key,
                                           const std::string& value) {
  return Commit({EtcdOp::Put(RendezvousPrefix(epoch) + key, value)});
}

absl::StatusOr<RendezvousEntries> EtcdStateStore::LoadRendezvous() {
  const std::string all = options_.prefix + "rendezvous/";
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult r, ReadPrefix(all));
  RendezvousEntries entries;
  for (const EtcdKeyValue& kv : r.kvs) {
    // <epoch:020>/<key>
    const std::string rest = kv.key.substr(all.size());
    const size_t slash = rest.find('/');
    int64_t epoch = 0;
    if (slash == std::string::npos ||
        !absl::SimpleAtoi(rest.substr(0, slash), &epoch)) {
      continue;
    }
    entries[epoch][rest.substr(slash + 1)] = kv.value;
  }
  return entries;
}

absl::Status EtcdStateStore::DropRendezvousBefore(int64_t epoch) {
  return Commit({EtcdOp::Delete(options_.prefix + "rendezvous/",
                                RendezvousPrefix(epoch))});
}

absl::Status EtcdStateStore::Commit(const std::vector<EtcdOp>& ops) {
  std::vector<EtcdCompare> compares;
  if (!fence_key_.empty()) {
    EtcdCompare c;
    c.key = fence_key_;
    c.target = EtcdCompare::Target::kCreate;
    c.result = EtcdCompare::Result::kEqual;
    c.number = fence_revision_;
    compares.push_back(std::move(c));
  }
  // Retrying is safe: the ops are the same, and a write that did land is
  // written again with the same values.
  ZSHARD_ASSIGN_OR_RETURN(EtcdTxnResult r,
                          Retrying<EtcdTxnResult>(options_.retry_ms, [&] {
                            return client_->Txn(compares, ops);
                          }));
  if (!r.succeeded) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store write refused: this coordinator is no longer the leader ('",
        fence_key_, "' with create revision ", fence_revision_, " is gone)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdStateStore::NextEventSeq() {
  if (next_event_seq_ > 0) return next_event_seq_;
  EtcdRange last;
  last.key = options_.prefix + "events/";
  last.range_end = EtcdClient::PrefixEnd(last.key);
  last.limit = 1;
  last.descend = true;
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult r, ReadRange(last));
  next_event_seq_ = r.kvs.empty() ? 1 : Tail(r.kvs[0].key) + 1;
  return next_event_seq_;
}

absl::StatusOr<std::vector<StoredEpoch>> EtcdStateStore::LatestEpochs(
    int64_t revision) {
  EtcdRange page;
  page.key = options_.prefix + "epochs/";
  page.range_end = EtcdClient::PrefixEnd(page.key);
  page.revision = revision;
  page.limit = kHistoryEpochs;
  page.descend = true;
  std::vector<StoredEpoch> newest_first;
  bool stable = false;
  while (true) {
    ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult r, ReadRange(page));
    for (const EtcdKeyValue& kv : r.kvs) {
      StoredEpoch e;
      if (!EpochRowFromJson(kv.value, &e)) continue;
      stable = stable || e.status == EpochStatus::kStable;
      newest_first.push_back(std::move(e));
    }
    // Enough: the history and the latest stable epoch are in (without a
    // stable one, every row is read: the latest committed one decides).
    if (!r.more || r.kvs.empty() ||
        (stable &&
         newest_first.size() >= static_cast<size_t>(kHistoryEpochs))) {
      break;
    }
    page.range_end = r.kvs.back().key;  // exclusive: the next page is older
  }
  return std::vector<StoredEpoch>(
      std::make_move_iterator(newest_first.rbegin()),
      std::make_move_iterator(newest_first.rend()));
}

absl::StatusOr<StoredState> EtcdStateStore::Load() {
  const std::string& p = options_.prefix;
  StoredState state;
  EtcdRange job;
  job.key = p + "job";
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult jobs, ReadRange(job));
  const int64_t rev = jobs.revision;  // every later read sees this revision
  if (!jobs.kvs.empty()) {
    json j = json::parse(jobs.kvs[0].value, nullptr, false);
    if (j.is_object()) {
      state.job_name = FieldOr(j, "name", "");
      state.job_spec_json = FieldOr(j, "spec_json", "");
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult members,
                          ReadPrefix(p + "members/", rev));
  for (const EtcdKeyValue& kv : members.kvs) {
    Member m;
    if (MemberFromJson(kv.value, &m)) state.members.push_back(std::move(m));
  }
  std::stable_sort(
      state.members.begin(), state.members.end(),
      [](const Member& a, const Member& b) { return a.join_seq < b.join_seq; });
  ZSHARD_ASSIGN_OR_RETURN(std::vector<StoredEpoch> all, LatestEpochs(rev));
  // As SQLite: from the latest stable epoch (else the latest committed or
  // broken one, else 0) on, with moves.
  int64_t stable = -1, committed = -1;
  for (const StoredEpoch& e : all) {
    if (e.status == EpochStatus::kStable) stable = e.plan.epoch;
    if (e.status == EpochStatus::kCommitted ||
        e.status == EpochStatus::kBroken) {
      committed = e.plan.epoch;
    }
  }
  const int64_t from = stable >= 0 ? stable : std::max<int64_t>(committed, 0);
  for (const StoredEpoch& e : all) {
    if (e.plan.epoch < from) continue;
    StoredEpoch with_moves = e;
    ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult chunks,
                            ReadPrefix(MovesPrefix(e.plan.epoch), rev));
    for (const EtcdKeyValue& kv : chunks.kvs) {
      std::vector<plan::Move> moves = MovesFromJson(kv.value);
      with_moves.plan.moves.insert(with_moves.plan.moves.end(),
                                   std::make_move_iterator(moves.begin()),
                                   std::make_move_iterator(moves.end()));
    }
    state.epochs.push_back(std::move(with_moves));
  }
  const size_t first = all.size() > static_cast<size_t>(kHistoryEpochs)
                           ? all.size() - static_cast<size_t>(kHistoryEpochs)
                           : 0;
  state.history.assign(std::make_move_iterator(all.begin() + first),
                       std::make_move_iterator(all.end()));
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult checkpoints,
                          ReadPrefix(p + "checkpoints/", rev));
  for (const EtcdKeyValue& kv : checkpoints.kvs) {
    CheckpointRecord c;
    if (CheckpointFromJson(kv.value, &c)) {
      state.checkpoints.push_back(std::move(c));
    }
  }
  const std::string meta_prefix = p + "meta/";
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult meta, ReadPrefix(meta_prefix, rev));
  for (const EtcdKeyValue& kv : meta.kvs) {
    int64_t value = 0;
    if (absl::SimpleAtoi(kv.value, &value)) {
      state.meta[kv.key.substr(meta_prefix.size())] = value;
    }
  }
  return state;
}

absl::Status EtcdStateStore::SaveJob(const std::string& name,
                                     const std::string& spec_json) {
  EtcdRange job;
  job.key = options_.prefix + "job";
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult r, ReadRange(job));
  if (!r.kvs.empty()) {
    json j = json::parse(r.kvs[0].value, nullptr, false);
    const std::string stored = j.is_object() ? FieldOr(j, "name", "") : "";
    if (stored != name) {
      return absl::FailedPreconditionError(
          absl::StrCat("etcd prefix '", options_.prefix, "' holds job '",
                       stored, "', not '", name, "'"));
    }
  }
  return Commit({EtcdOp::Put(
      job.key, json{{"name", name}, {"spec_json", spec_json}}.dump())});
}

absl::Status EtcdStateStore::Apply(const StoreWrite& write) {
  if (write.empty()) return absl::OkStatus();
  const std::string& p = options_.prefix;
  // etcd refuses a transaction that names a key twice: later upserts of a
  // key replace earlier ones, and a deleted member is not also written.
  std::map<std::string, std::string> puts;
  std::vector<EtcdOp> deletes;
  const std::set<std::string> deleted(write.deleted_members.begin(),
                                      write.deleted_members.end());
  for (const Member& m : write.members) {
    if (deleted.count(m.worker_id) > 0) continue;
    puts[p + "members/" + m.worker_id] = MemberJson(m);
  }
  for (const std::string& id : deleted) {
    deletes.push_back(EtcdOp::Delete(p + "members/" + id));
  }
  // A merged batch may hold an epoch more than once: as SQLite applies
  // them in order, the row is the last one's and the moves are those of
  // the last one that carries moves (moves_unchanged keeps what is there).
  std::map<int64_t, const StoredEpoch*> rows;
  std::map<int64_t, const StoredEpoch*> moves_of;
  for (const StoredEpoch& e : write.epochs) {
    rows[e.plan.epoch] = &e;
    if (!e.moves_unchanged) moves_of[e.plan.epoch] = &e;
  }
  for (const auto& [number, e] : rows)
    puts[EpochKey(number)] = EpochRowJson(*e);
  for (const auto& [number, e] : moves_of) {
    const std::vector<plan::Move>& moves = e->plan.moves;
    const size_t per = static_cast<size_t>(options_.moves_per_chunk);
    int64_t chunk = 0;
    for (size_t begin = 0; begin < moves.size(); begin += per, ++chunk) {
      std::vector<plan::Move> part(
          moves.begin() + begin,
          moves.begin() + std::min(moves.size(), begin + per));
      puts[MovesPrefix(number) + Padded(chunk, 6)] = MovesJson(part);
    }
    // Chunks of an earlier, longer move list of this epoch.
    deletes.push_back(
        EtcdOp::Delete(MovesPrefix(number) + Padded(chunk, 6),
                       EtcdClient::PrefixEnd(MovesPrefix(number))));
  }
  for (const CheckpointRecord& c : write.checkpoints) {
    puts[absl::StrCat(p, "checkpoints/", Padded(c.step, 20))] =
        CheckpointJson(c);
  }
  for (const auto& [key, value] : write.meta) {
    puts[p + "meta/" + key] = std::to_string(value);
  }
  int64_t next_seq = 0;
  if (!write.events.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(next_seq, NextEventSeq());
    int64_t first_new = -1;
    for (const Event& e : write.events) {
      // As SQLite's row ids: a given seq is kept, an unset one is the next.
      const int64_t seq = e.seq > 0 ? e.seq : next_seq;
      next_seq = std::max(next_seq, seq + 1);
      if (first_new < 0 || seq < first_new) first_new = seq;
      puts[absl::StrCat(p, "events/", Padded(seq, 20))] = json{
          {"time_ms", e.time_ms},
          {"epoch", e.epoch},
          {"kind", e.kind},
          {"reason", e.reason}}.dump();
    }
    const int64_t keep_from =
        std::min(first_new, next_seq - options_.max_events);
    if (keep_from > 1) {
      deletes.push_back(EtcdOp::Delete(
          p + "events/", absl::StrCat(p, "events/", Padded(keep_from, 20))));
    }
  }
  std::vector<EtcdOp> ops;
  ops.reserve(puts.size() + deletes.size());
  for (auto& [key, value] : puts) {
    ops.push_back(EtcdOp::Put(key, std::move(value)));
  }
  for (EtcdOp& d : deletes) ops.push_back(std::move(d));
  absl::Status s = Commit(ops);
  if (!s.ok()) {
    next_event_seq_ = 0;  // re-read: the outcome may be unknown
    return s;
  }
  if (next_seq > 0) next_event_seq_ = next_seq;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> EtcdStateStore::RecentEvents(int limit) {
  std::vector<Event> events;
  if (limit <= 0) return events;
  EtcdRange range;
  range.key = options_.prefix + "events/";
  range.range_end = EtcdClient::PrefixEnd(range.key);
  range.limit = limit;
  range.descend = true;
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult r, ReadRange(range));
  for (auto it = r.kvs.rbegin(); it != r.kvs.rend(); ++it) {
    json j = json::parse(it->value, nullptr, false);
    if (!j.is_object()) continue;
    events.push_back(Event{
        FieldOr(j, "time_ms", int64_t{0}), FieldOr(j, "epoch", int64_t{0}),
        FieldOr(j, "kind", ""), FieldOr(j, "reason", ""), Tail(it->key)});
  }
  return events;
}

}  // namespace zshard::server
