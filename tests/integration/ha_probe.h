// gRPC probes of one coordinator for the high-availability tests: its
// health per service, a worker RPC's answer (code, message, the leader in
// the trailing metadata), its cluster status and rendezvous calls.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"
#include "zshard/v1/dashboard_service.pb.h"

namespace zshard::testing {

// grpc.health.v1 Check of `service` ("" for the server): 1 SERVING,
// 2 NOT_SERVING, -1 when the call failed.
int HealthOf(const std::string& address, const std::string& service);

// A Heartbeat of an unknown worker: a leader answers NOT_FOUND, a standby
// UNAVAILABLE naming the leader.
struct RpcAnswer {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  // The trailing metadata under kLeaderMetadataKey ("" when absent).
  std::string leader;
};
RpcAnswer HeartbeatAnswer(const std::string& address);
// The end of a WatchPlan stream of an unknown worker (a server stream).
RpcAnswer WatchPlanAnswer(const std::string& address);

absl::StatusOr<v1::GetClusterStatusResponse> ClusterStatus(
    const std::string& address);

// A session of a member the test joins itself (it holds no state).
struct TestSession {
  std::string worker_id;
  std::string token;
};
absl::StatusOr<TestSession> JoinAs(const std::string& address,
                                   const std::string& name);
absl::Status Heartbeat(const std::string& address, const TestSession& s,
                       int64_t epoch);
absl::Status RendezvousSet(const std::string& address, const TestSession& s,
                           int64_t epoch, const std::string& key,
                           const std::string& value);
// Does not block: NOT_FOUND-like DeadlineExceeded when the key is unset.
absl::StatusOr<std::string> RendezvousGet(const std::string& address,
                                          const TestSession& s, int64_t epoch,
                                          const std::string& key);

}  // namespace zshard::testing
