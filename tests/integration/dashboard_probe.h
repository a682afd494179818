// A small gRPC client of the coordinator's DashboardService for
// integration tests: cluster status, the event log (with numeric times),
// the re-shard history and the committed checkpoints, plus helpers that
// read numbers out of event reasons. Cheaper to poll than zshardctl.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"

namespace zshard::testing {

// Talks to one coordinator address; survives coordinator restarts (a
// failed call drops the channel and the next call dials again). Not
// thread-safe.
class DashboardProbe {
 public:
  // `address` is HOST:PORT (plaintext). `timeout_ms` bounds every call.
  explicit DashboardProbe(std::string address, int64_t timeout_ms = 2000);

  absl::StatusOr<v1::GetClusterStatusResponse> Status();
  // Every event the coordinator keeps, oldest first (all pages).
  absl::StatusOr<std::vector<v1::Event>> Events();
  absl::StatusOr<std::vector<v1::Reshard>> Reshards();
  absl::StatusOr<std::vector<v1::CheckpointManifest>> Checkpoints();
  // The whole checkpoint list: committed manifests and incomplete attempts.
  absl::StatusOr<v1::ListCheckpointsResponse> CheckpointList();

 private:
  v1::DashboardService::Stub* stub();
  // Converts a failed call and forgets the channel.
  absl::Status Failed(absl::string_view what, const grpc::Status& status);

  const std::string address_;
  const int64_t timeout_ms_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DashboardService::Stub> stub_;
};

// Events of `kind` with seq > after_seq, oldest first.
std::vector<v1::Event> EventsOfKind(const std::vector<v1::Event>& events,
                                    absl::string_view kind,
                                    int64_t after_seq = 0);

// The highest seq in `events` (0 when empty).
int64_t LastSeq(const std::vector<v1::Event>& events);

// One line per event ("seq kind epoch: reason"), for failure messages.
std::string DescribeEvents(const std::vector<v1::Event>& events);

// The number N in the first "N bytes" of a reason ("epoch 3: 4 moves, 1200
// bytes (lower bound 1200), 0 from checkpoint" -> 1200); nullopt if none.
std::optional<int64_t> BytesInReason(const std::string& reason);
// The number after "lower bound" in a reason; nullopt if none.
std::optional<int64_t> LowerBoundInReason(const std::string& reason);

// Status helpers: the member named `name` (nullptr if absent); the members
// holding a rank (ACTIVE with rank >= 0); the lowest step among them (-1
// when there is none).
const v1::MemberStatus* FindMemberStatus(
    const v1::GetClusterStatusResponse& status, absl::string_view name);
std::vector<v1::MemberStatus> RankedMembers(
    const v1::GetClusterStatusResponse& status);
int64_t MinRankedStep(const v1::GetClusterStatusResponse& status);

}  // namespace zshard::testing
