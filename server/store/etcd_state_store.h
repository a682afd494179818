// The coordinator's durable state in etcd, under a key prefix P (one job per
// prefix), with the SQLite store's encodings (store_json.h):
//   P/job                   {"name", "spec_json"}
//   P/members/<worker_id>   MemberJson
//   P/epochs/<epoch:020>    EpochRowJson (without moves)
//   P/moves/<epoch:020>/<chunk:06>  MovesJson of up to moves_per_chunk moves
//   P/meta/<key>            the counter in decimal
//   P/events/<seq:020>      {"time_ms", "epoch", "kind", "reason"}
//   P/checkpoints/<step:020> CheckpointJson
//   P/rendezvous/<epoch:020>/<key>  the rendezvous value (raw bytes)
// Apply is one etcd transaction. A batch's op count and size are bounded by
// etcd's --max-txn-ops (default 128) and --max-request-bytes (default
// 1.5 MiB); a job of many members or large move lists needs them raised
// (the error says so). Events are kept up to max_events (the oldest are
// deleted in the same transaction); SQLite keeps them all, and the
// coordinator reads back only the latest EventLogOptions::capacity.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/state/state_store.h"
#include "server/store/etcd_client.h"

namespace zshard::server {

struct EtcdStateStoreOptions {
  EtcdClientOptions client;
  // Key prefix of this job's state; required. A trailing '/' is added.
  std::string prefix;
  // Stored events beyond this many are deleted, oldest first.
  int64_t max_events = 100000;
  // Moves per P/moves/ value (about 150 bytes each in JSON).
  int64_t moves_per_chunk = 2048;
  // A read or write etcd cannot take (unreachable, no raft leader) is
  // retried for this long before it fails with Unavailable. Open does not
  // retry: a coordinator starts only with its store reachable.
  int64_t retry_ms = 5000;
};

// Thread-compatible: the membership serialises calls under its lock.
class EtcdStateStore final : public StateStore {
 public:
  // Connects and reads P/job: Unavailable naming the endpoints when etcd
  // cannot be reached; InvalidArgument for an empty prefix or bad endpoints.
  static absl::StatusOr<std::unique_ptr<EtcdStateStore>> Open(
      EtcdStateStoreOptions options);

  absl::StatusOr<StoredState> Load() override;
  absl::Status SaveJob(const std::string& name,
                       const std::string& spec_json) override;
  // One etcd transaction (retried while etcd is unreachable, up to
  // retry_ms). FailedPrecondition when fenced (SetFence) and the fence key
  // no longer has its create revision.
  absl::Status Apply(const StoreWrite& write) override;
  absl::StatusOr<std::vector<Event>> RecentEvents(int limit) override;
  absl::Status PutRendezvous(int64_t epoch, const std::string& key,
                             const std::string& value) override;
  absl::StatusOr<RendezvousEntries> LoadRendezvous() override;
  absl::Status DropRendezvousBefore(int64_t epoch) override;

  // Guards every later write: it only happens while `key` exists with
  // this create revision (a leader's campaign key; see LeaderElection).
  // An empty key removes the guard. Forgets what it cached of the store
  // (another leader may have written since).
  void SetFence(std::string key, int64_t create_revision);

  const std::string& prefix() const { return options_.prefix; }
  EtcdClient* client() { return client_.get(); }

 private:
  EtcdStateStore(EtcdStateStoreOptions options,
                 std::unique_ptr<EtcdClient> client)
      : options_(std::move(options)), client_(std::move(client)) {}
  // Reads, retried as writes are (retry_ms).
  absl::StatusOr<EtcdRangeResult> ReadRange(const EtcdRange& range);
  absl::StatusOr<EtcdRangeResult> ReadPrefix(const std::string& prefix,
                                             int64_t revision = 0);
  // The epoch rows (without moves) from the newest back to the latest
  // stable one and at least kHistoryEpochs of them, oldest first, as of
  // `revision`: a long job's older epochs are not read.
  absl::StatusOr<std::vector<StoredEpoch>> LatestEpochs(int64_t revision);
  // Runs `ops` in one transaction under the fence.
  absl::Status Commit(const std::vector<EtcdOp>& ops);
  // The next event seq (read from etcd when unknown).
  absl::StatusOr<int64_t> NextEventSeq();
  std::string EpochKey(int64_t epoch) const;
  std::string MovesPrefix(int64_t epoch) const;
  std::string RendezvousPrefix(int64_t epoch) const;

  const EtcdStateStoreOptions options_;
  std::unique_ptr<EtcdClient> client_;
  std::string fence_key_;
  int64_t fence_revision_ = 0;
  // 0: unknown (read from etcd at the next write of events).
  int64_t next_event_seq_ = 0;
};

}  // namespace zshard::server
