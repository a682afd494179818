// LeaderFollower: the address list, the switch rules and the retry helper.

#include "common/net/leader_follower.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/net/coordinator_list.h"
#include "common/net/leader_redirect.h"
#include "common/status.h"

namespace zshard::net {
namespace {

// A call that ended so found no leader at its address.
bool FoundNoLeader(const grpc::Status& status, bool deadline_is_unreachable) {
  const grpc::StatusCode code = status.error_code();
  return code == grpc::StatusCode::UNAVAILABLE ||
         (deadline_is_unreachable &&
          code == grpc::StatusCode::DEADLINE_EXCEEDED);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderFollower>> LeaderFollower::Create(
    const ChannelOptions& options) {
  ZSHARD_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                          ParseCoordinatorList(options.target));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& address : addresses) {
    ChannelOptions one = options;
    one.target = address;
    ZSHARD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                            MakeCoordinatorChannel(one));
    channels.push_back(std::move(channel));
  }
  return std::unique_ptr<LeaderFollower>(
      new LeaderFollower(options, std::move(addresses), std::move(channels)));
}

LeaderFollower::LeaderFollower(
    const ChannelOptions& options, std::vector<std::string> addresses,
    std::vector<std::shared_ptr<grpc::Channel>> channels)
    : options_(options),
      list_(options.target),
      addresses_(std::move(addresses)),
      channels_(std::move(channels)) {}

LeaderFollower::Pick LeaderFollower::Current() const {
  absl::MutexLock lock(&mu_);
  return Pick{channels_[current_], addresses_[current_], current_, generation_};
}

size_t LeaderFollower::size() const {
  absl::MutexLock lock(&mu_);
  return addresses_.size();
}

LeaderFollower::Move LeaderFollower::OnFailure(
    const Pick& used, const grpc::Status& status,
    const grpc::ClientContext& context, bool deadline_is_unreachable) {
  if (!FoundNoLeader(status, deadline_is_unreachable)) return Move::kStayed;
  return Follow(used, LeaderFromTrailers(context));
}

LeaderFollower::Move LeaderFollower::Follow(const Pick& used,
                                            const std::string& leader) {
  absl::MutexLock lock(&mu_);
  if (used.generation != generation_) return Move::kStayed;
  std::string why = "unreachable or not leading";
  size_t next = current_;
  Move move = Move::kStayed;
  if (!leader.empty() && leader != used.address) {
    auto it = std::find(addresses_.begin(), addresses_.end(), leader);
    if (it != addresses_.end()) {
      next = static_cast<size_t>(it - addresses_.begin());
      move = Move::kToLeader;
    } else if (ParseCoordinatorList(leader).ok()) {
      ChannelOptions one = options_;
      one.target = leader;
      // The TLS files were read once already; a failure now (a file
      // removed since) leaves the round robin to move on.
      absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
          MakeCoordinatorChannel(one);
      if (channel.ok()) {
        addresses_.push_back(leader);
        channels_.push_back(*std::move(channel));
        next = addresses_.size() - 1;
        move = Move::kToLeader;
      }
    }
    if (move == Move::kToLeader) why = "a standby named the leader";
  }
  if (move == Move::kStayed && addresses_.size() > 1) {
    next = (current_ + 1) % addresses_.size();
    move = Move::kToNext;
  }
  if (move == Move::kStayed) return move;
  ZSHARD_LOG_INFO("switching coordinator", {{"from", addresses_[current_]},
                                            {"to", addresses_[next]},
                                            {"reason", why}});
  current_ = next;
  ++generation_;
  return move;
}

std::string LeaderFromTrailers(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kLeaderMetadataKey);
  if (it == trailers.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

grpc::Status CallOnLeader(
    LeaderFollower& follower,
    const std::function<std::unique_ptr<grpc::ClientContext>()>& make_context,
    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*)>& call,
    const FollowOptions& options) {
  grpc::Status status;
  for (int attempt = 0;; ++attempt) {
    const int limit = options.max_attempts > 0
                          ? options.max_attempts
                          : 2 * static_cast<int>(follower.size()) + 1;
    const LeaderFollower::Pick pick = follower.Current();
    std::unique_ptr<grpc::ClientContext> context = make_context();
    status = call(pick.channel, context.get());
    if (!FoundNoLeader(status, options.deadline_is_unreachable) ||
        attempt + 1 >= limit) {
      return status;
    }
    const LeaderFollower::Move move =
        follower.Follow(pick, LeaderFromTrailers(*context));
    // Stayed with the pick still current: nothing else to try.
    if (move == LeaderFollower::Move::kStayed &&
        follower.Current().generation == pick.generation) {
      return status;
    }
  }
}

bool MetAnElection(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

grpc::Status RetryThroughElection(const LeaderFollower& follower,
                                  absl::Duration wait,
                                  const std::function<grpc::Status()>& round) {
  const absl::Time give_up = absl::Now() + wait;
  absl::Duration pause = absl::Milliseconds(100);
  while (true) {
    grpc::Status status = round();
    if (!MetAnElection(status) || follower.size() < 2 ||
        absl::Now() + pause >= give_up) {
      return status;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Seconds(1));
  }
}

}  // namespace zshard::net
