// CoordinatorKvStore: request building and deadlines; status conversion
// goes through common/grpc_status.

#include "client/worker/session/coordinator_kv_store.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "client/worker/session/backoff.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"

namespace zshard::worker {
namespace {

std::chrono::system_clock::time_point DeadlineIn(int64_t ms) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(std::max<int64_t>(ms, 1));
}

}  // namespace

int64_t CoordinatorKvStore::ServerWaitMs(
    std::chrono::system_clock::time_point deadline) const {
  const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::system_clock::now())
                           .count();
  return std::max<int64_t>(0, left - options_.rpc_margin_ms);
}

CoordinatorKvStore::CoordinatorKvStore(
    const Options& options, std::shared_ptr<net::LeaderFollower> coordinators)
    : options_(options), coordinators_(std::move(coordinators)) {}

grpc::Status CoordinatorKvStore::Call(
    std::chrono::system_clock::time_point deadline, const KvCall& call) {
  // Every attempt shares the one deadline. A DEADLINE_EXCEEDED may be the
  // coordinator's own answer to a Get or Wait: never a reason to move.
  // With several coordinators, no leader anywhere is an election in
  // progress (a failover; net::MetAnElection): the time without a leader
  // does not count
  // against the call, whose deadline moves later by as much (up to
  // election_wait_ms in all), so that the rendezvous of an open transition
  // survives it: its peers, held up by the same election, still get the
  // whole timeout to meet. With one, fail at once as ever (the
  // coordinator retries the epoch).
  const bool elections = coordinators_->size() >= 2;
  const auto max_extension = std::chrono::milliseconds(
      std::max<int64_t>(options_.election_wait_ms, 0));
  std::chrono::system_clock::duration extended{0};
  Backoff backoff(options_.min_backoff_ms, options_.max_backoff_ms);
  while (true) {
    const auto started = std::chrono::system_clock::now();
    const auto effective = deadline + extended;
    // Past the deadline an attempt gets the margin; a Get or Wait then
    // lets the server wait 0 ms.
    const auto attempt_deadline =
        started < effective
            ? effective
            : started + std::chrono::milliseconds(
                            std::max<int64_t>(options_.rpc_margin_ms, 1));
    grpc::Status status = net::CallOnLeader(
        *coordinators_,
        [attempt_deadline] {
          auto context = std::make_unique<grpc::ClientContext>();
          context->set_deadline(attempt_deadline);
          return context;
        },
        [&call, effective](const std::shared_ptr<grpc::Channel>& channel,
                           grpc::ClientContext* context) {
          return call(*v1::RendezvousService::NewStub(channel), context,
                      effective);
        });
    if (!net::MetAnElection(status) || !elections) return status;
    const auto wake = std::chrono::system_clock::now() +
                      std::chrono::milliseconds(backoff.NextMs());
    // This attempt and the pause after it found no leader.
    const auto lost = wake - started;
    if (extended + lost > max_extension) return status;
    extended += lost;
    std::this_thread::sleep_until(wake);
  }
}

absl::Status CoordinatorKvStore::Set(absl::string_view key,
                                     absl::string_view value) {
  v1::SetRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_token(options_.token);
  request.set_epoch(options_.epoch);
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  v1::SetResponse response;
  return FromGrpcStatus(
      Call(DeadlineIn(options_.rpc_margin_ms),
           [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c,
               std::chrono::system_clock::time_point) {
             return stub.Set(c, request, &response);
           }));
}

absl::StatusOr<std::string> CoordinatorKvStore::Get(absl::string_view key,
                                                    int64_t timeout_ms) {
  v1::GetRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_token(options_.token);
  request.set_epoch(options_.epoch);
  request.set_key(std::string(key));
  v1::GetResponse response;
  const auto deadline = DeadlineIn(timeout_ms + options_.rpc_margin_ms);
  grpc::Status status = Call(
      deadline, [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c,
                    std::chrono::system_clock::time_point effective) {
        request.set_timeout_ms(ServerWaitMs(effective));
        return stub.Get(c, request, &response);
      });
  if (!status.ok()) return FromGrpcStatus(status);
  return std::move(*response.mutable_value());
}

absl::Status CoordinatorKvStore::Wait(const std::vector<std::string>& keys,
                                      int64_t timeout_ms) {
  v1::WaitRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_token(options_.token);
  request.set_epoch(options_.epoch);
  for (const std::string& key : keys) request.add_keys(key);
  v1::WaitResponse response;
  const auto deadline = DeadlineIn(timeout_ms + options_.rpc_margin_ms);
  return FromGrpcStatus(Call(
      deadline, [&](v1::RendezvousService::Stub& stub, grpc::ClientContext* c,
                    std::chrono::system_clock::time_point effective) {
        request.set_timeout_ms(ServerWaitMs(effective));
        return stub.Wait(c, request, &response);
      }));
}

}  // namespace zshard::worker
