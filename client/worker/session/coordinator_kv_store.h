// A KvStore over the coordinator's RendezvousService: the store behind the
// Gloo and NCCL rendezvous of one epoch. The coordinator namespaces keys by
// job and epoch, so a stale epoch's keys are never visible to a newer one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/worker/comm/kv_store.h"
#include "grpcpp/channel.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"

namespace zshard::worker {

// Thread-safe (gRPC stubs are). Bound to one incarnation and one epoch.
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
  };

  // `channel` must be non-null.
  CoordinatorKvStore(const Options& options,
                     std::shared_ptr<grpc::Channel> channel);

  // Errors come from the coordinator: FailedPrecondition for an epoch that
  // is no longer current, Unauthenticated for a fenced token, Unavailable
  // when it cannot be reached, InvalidArgument for an oversized key/value.
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override;

 private:
  const Options options_;
  std::unique_ptr<v1::RendezvousService::Stub> stub_;
};

}  // namespace zshard::worker
