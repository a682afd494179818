// A KvStore over the coordinator's RendezvousService: the store behind the
// Gloo and NCCL rendezvous of one epoch. The coordinator namespaces keys by
// job and epoch, so a stale epoch's keys are never visible to a newer one.
// With several coordinators each call follows the leader
// (common/net/leader_follower.h) within its deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/worker/comm/kv_store.h"
#include "common/net/leader_follower.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"

namespace zshard::worker {

// Thread-safe (gRPC stubs and the follower are). Bound to one incarnation
// and one epoch.
class CoordinatorKvStore final : public comm::KvStore {
 public:
  struct Options {
    // This incarnation's credentials, from Join. Required.
    std::string worker_id;
    std::string token;
    // The epoch whose namespace this store reads and writes. Required.
    int64_t epoch = 0;
    // Added to a blocking call's timeout for the RPC deadline, so the
    // server's DEADLINE_EXCEEDED arrives before the client's. Default 2000.
    int64_t rpc_margin_ms = 2000;
    // With several coordinators, a call that finds no leader is asked
    // again after these backoff bounds until its deadline. Defaults 100
    // and 1000 ms.
    int64_t min_backoff_ms = 100;
    int64_t max_backoff_ms = 1000;
    // With several coordinators, the time a call finds no leader (an
    // election lasts up to the lease TTL + 2 s) moves its deadline later
    // by as much, up to this long in all: peers held up by the same
    // election still get the call's whole timeout to meet. An attempt past
    // the deadline gets rpc_margin_ms. Default 10000.
    int64_t election_wait_ms = 10000;
  };

  // `coordinators` must be non-null.
  CoordinatorKvStore(const Options& options,
                     std::shared_ptr<net::LeaderFollower> coordinators);

  // Errors come from the coordinator: FailedPrecondition for an epoch that
  // is no longer current, Unauthenticated for a fenced token, Unavailable
  // when no leader can be reached (a standby answering is tried past, to
  // the leader it names or the next address, within the call's deadline),
  // InvalidArgument for an oversized key/value.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override;

  // The incarnation's credentials and the epoch this store is bound to.
  const Options& options() const { return options_; }

 private:
  // What a Get or Wait lets the coordinator wait, in ms: the time left to
  // `deadline` less the margin.
  int64_t ServerWaitMs(std::chrono::system_clock::time_point deadline) const;
  // One attempt on `stub`, with the call's deadline as moved so far.
  using KvCall = std::function<grpc::Status(
      v1::RendezvousService::Stub&, grpc::ClientContext*,
      std::chrono::system_clock::time_point)>;
  // Calls `call` on the leader until `deadline`, moved later by the time
  // without a leader (see election_wait_ms).
  grpc::Status Call(std::chrono::system_clock::time_point deadline,
                    const KvCall& call);

  const Options options_;
  const std::shared_ptr<net::LeaderFollower> coordinators_;
};

}  // namespace zshard::worker
