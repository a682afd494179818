// Leader election on etcd, etcd's own recipe: each candidate holds a lease
// and a campaign key PREFIX/election/<lease id> attached to it; the key
// with the lowest create revision leads. The leader fences its writes with
// that key's create revision (EtcdStateStore::SetFence): once its lease is
// revoked or expires, the key is gone and every write it tries fails, so a
// deposed leader can never write. A candidate that lost its lease campaigns
// again with a new one (a new, higher create revision: a standby).
//
// Candidates poll the election keys (no watch): a new leader is seen within
// poll_interval_ms of the old key's deletion, which comes at the latest one
// lease TTL after the old leader stopped renewing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/etcd_client.h"

namespace zshard::server {

struct LeaderElectionOptions {
  EtcdClientOptions client;
  // The store's prefix; campaign keys live under PREFIX/election/.
  std::string prefix;
  // This candidate's value in its key (e.g. its gRPC address); required,
  // with no space.
  std::string id;
  // What else the candidate publishes: its HTTP address (the coordinator's
  // dashboard), after the id in the key's value: "ID http=HOST:PORT".
  // Empty: the value is the id alone.
  std::string http;
  // Lease TTL in seconds: how long a dead leader keeps its place.
  int64_t ttl_s = 5;
  // How often leadership is checked (and the lease renewed, at most every
  // ttl_s / 3).
  int64_t poll_interval_ms = 100;
};

// Thread-safe. A background thread renews the lease and follows the keys.
class LeaderElection {
 public:
  // Grants the lease and puts the campaign key. Unavailable (naming the
  // endpoint) when etcd cannot be reached; InvalidArgument for an empty
  // prefix or id.
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Campaign(
      LeaderElectionOptions options);
  // Resigns (revokes the lease) and stops.
  ~LeaderElection();

  // Waits up to `timeout` for this candidate to lead; true when it does.
  bool WaitForLeadership(absl::Duration timeout);
  bool leading();
  // The campaign key and its create revision: the fence of this
  // candidate's writes (meaningful while leading()).
  struct Fence {
    std::string key;
    int64_t create_revision = 0;
  };
  Fence fence();
  // The fence of the current leadership, read together with it: set only
  // while this candidate leads. A writer fences with what this returned
  // when it took over; once that key is gone, none of its writes land.
  std::optional<Fence> LeadingFence();
  int64_t lease();
  // The leading candidate's id, from etcd ("" when there is none).
  absl::StatusOr<std::string> Leader();
  // One campaign key as the last poll saw it.
  struct Candidate {
    std::string id;
    std::string http;  // LeaderElectionOptions::http ("" when none)
    int64_t create_revision = 0;
    bool self = false;  // this candidate's own key
  };
  // Every candidate as of the last poll (at most poll_interval_ms old),
  // the leader first, then by create revision; empty before the first
  // poll or while etcd cannot be read.
  std::vector<Candidate> Candidates();
  // Why this candidate last stopped leading (its lease expired or was
  // revoked, etcd unreachable, a key with a lower revision); "" if never.
  std::string LossReason();
  const std::string& id() const { return options_.id; }
  // Revokes the lease: the key goes, another candidate leads. Idempotent;
  // the candidate does not campaign again.
  absl::Status Resign();
  // Revokes the lease, as Resign does, but campaigns again with a new key
  // (a higher create revision: a standby behind the others), so that
  // another candidate leads. `why` becomes LossReason().
  absl::Status Yield(const std::string& why);
  // Test hook: stops renewing the lease without revoking it, as a frozen
  // or killed process would (the lease then expires after ttl_s).
  void StopRenewing();

 private:
  explicit LeaderElection(LeaderElectionOptions options,
                          std::unique_ptr<EtcdClient> client);
  // Grants a lease and puts a fresh campaign key.
  absl::Status PutKey() ABSL_LOCKS_EXCLUDED(mu_);
  // Renews, re-campaigns if the lease is gone, and updates leading_.
  void Step() ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();

  const LeaderElectionOptions options_;
  const std::string election_prefix_;
  std::unique_ptr<EtcdClient> client_;
  absl::Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::string key_ ABSL_GUARDED_BY(mu_);
  int64_t create_revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Candidate> candidates_ ABSL_GUARDED_BY(mu_);
  std::string loss_reason_ ABSL_GUARDED_BY(mu_);
  bool resigned_ ABSL_GUARDED_BY(mu_) = false;
  bool renewing_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // On the steady clock, as etcd times leases: a step of the wall clock
  // neither delays a renewal nor ends the leadership early.
  std::chrono::steady_clock::time_point last_renewal_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zshard::server
