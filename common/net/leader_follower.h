// Follows the leading coordinator among several (docs/design.md section 11):
// one channel per address, the current one, and the switch after a call
// that found no leader there, to the address a standby names in its
// trailing metadata (leader_redirect.h) or else to the next in the list.
// Shared by the worker, zshardctl and the load generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/net/channel.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace zshard::net {

// Thread-safe. Channels connect lazily and live as long as the follower.
class LeaderFollower {
 public:
  // The address a call goes to.
  struct Pick {
    std::shared_ptr<grpc::Channel> channel;
    // HOST:PORT of `channel`.
    std::string address;
    // Which address, in the order they became known (the list first);
    // stable for the follower's life.
    size_t index = 0;
    // Counts the switches: a failure reported with an older generation
    // was already acted on and moves nothing.
    uint64_t generation = 0;
  };

  // What a reported failure did.
  enum class Move {
    // The call did not fail for want of a leader, the current address had
    // already moved on since `used` (another caller's report), or there is
    // no other address to try.
    kStayed,
    // A standby named the leader: retry there at once.
    kToLeader,
    // Round robin to the next address: retry after the caller's backoff.
    kToNext,
  };

  // `options.target` is the address list (ParseCoordinatorList); the TLS
  // and backoff fields apply to every channel, and to a leader a standby
  // names that is not in the list. InvalidArgument for a bad list or bad
  // TLS files. The first address is the current one.
  static absl::StatusOr<std::unique_ptr<LeaderFollower>> Create(
      const ChannelOptions& options);

  LeaderFollower(const LeaderFollower&) = delete;
  LeaderFollower& operator=(const LeaderFollower&) = delete;

  // The current address and its channel.
  Pick Current() const;

  // Reports a call made on `used` that ended with `status`; `context` is
  // the call's (finished) context, whose trailing metadata may name the
  // leader. Moves when the call found no leader at `used`: UNAVAILABLE,
  // and DEADLINE_EXCEEDED too when `deadline_is_unreachable` (unary calls
  // whose deadline only bounds the wait for an answer; never a long poll
  // whose server answers DEADLINE_EXCEEDED itself). A named leader that is
  // not in the list gets a channel of its own (and a place in the round
  // robin); a leader that names the address that refused is ignored.
  Move OnFailure(const Pick& used, const grpc::Status& status,
                 const grpc::ClientContext& context,
                 bool deadline_is_unreachable = false);
  // The move of a call on `used` that found no leader there, with the
  // leader a standby named ("" when none was named).
  Move Follow(const Pick& used, const std::string& leader);

  // The addresses given, as given ("a:1,b:2"), for messages.
  const std::string& list() const { return list_; }
  // How many addresses are known (the list and named leaders).
  size_t size() const;

 private:
  LeaderFollower(const ChannelOptions& options,
                 std::vector<std::string> addresses,
                 std::vector<std::shared_ptr<grpc::Channel>> channels);

  const ChannelOptions options_;
  const std::string list_;
  mutable absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// The leader's address in a finished call's trailing metadata ("" when
// absent).
std::string LeaderFromTrailers(const grpc::ClientContext& context);

// How CallOnLeader retries.
struct FollowOptions {
  // Calls at most; 0 (default): twice the known addresses plus one, so
  // each address is tried and each redirect followed.
  int max_attempts = 0;
  // Passed to OnFailure. Default false.
  bool deadline_is_unreachable = false;
};

// Makes one call on the current address and, while it finds no leader
// there, follows (OnFailure) and calls again at once, within
// `options.max_attempts`. `make_context` gives each attempt a fresh context
// (deadline, metadata); `call` makes the call on the given channel. Returns
// the last attempt's status. For one-shot callers (zshardctl, the
// rendezvous store); blocks for the calls.
grpc::Status CallOnLeader(
    LeaderFollower& follower,
    const std::function<std::unique_ptr<grpc::ClientContext>()>& make_context,
    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*)>& call,
    const FollowOptions& options = FollowOptions());

// Whether a call that ended with `status` met an election rather than an
// answer: UNAVAILABLE (no leader anywhere), or CANCELLED (cut by a server
// going away as its coordinator changes role, the standby's server making
// way for the leader's).
bool MetAnElection(const grpc::Status& status);

// Runs `round` (say, one CallOnLeader) and, while it MetAnElection with
// several coordinators known (as during a failover), runs it again after a
// pause of 100 ms, doubling up to 1 s, until `wait` has passed since the
// first. Returns the last round's status. With one coordinator, `round`
// runs once.
grpc::Status RetryThroughElection(const LeaderFollower& follower,
                                  absl::Duration wait,
                                  const std::function<grpc::Status()>& round);

}  // namespace zshard::net
