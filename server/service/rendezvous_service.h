// RendezvousService adapter: checks the session and the epoch with the
// membership, then uses the epoch-scoped RendezvousKv.
#pragma once

#include "server/membership/membership.h"
#include "server/metrics/rpc_metrics.h"
#include "server/rendezvous/rendezvous_kv.h"
#include "zshard/v1/rendezvous_service.grpc.pb.h"

namespace zshard::server {

// Thread-safe. Borrows everything; all outlive the service.
class RendezvousServiceImpl final : public v1::RendezvousService::Service {
 public:
  RendezvousServiceImpl(Membership* membership, RendezvousKv* kv,
                        RpcMetrics* metrics)
      : membership_(membership), kv_(kv), metrics_(metrics) {}

  grpc::Status Set(grpc::ServerContext* ctx, const v1::SetRequest* req,
                   v1::SetResponse* resp) override;
  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetRequest* req,
                   v1::GetResponse* resp) override;
  grpc::Status Wait(grpc::ServerContext* ctx, const v1::WaitRequest* req,
                    v1::WaitResponse* resp) override;

 private:
  absl::Status Check(const std::string& worker_id, const std::string& token,
                     int64_t epoch);

  Membership* membership_;
  RendezvousKv* kv_;
  RpcMetrics* metrics_;
};

}  // namespace zshard::server
