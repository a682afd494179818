// RendezvousService adapter.
#include "server/service/rendezvous_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {
namespace {

// The wait allowed by the request and by the call's own deadline.
absl::StatusOr<absl::Duration> Timeout(grpc::ServerContext* ctx,
                                       int64_t timeout_ms) {
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError("timeout_ms must be >= 0");
  }
  absl::Duration t = absl::Milliseconds(timeout_ms);
  auto left = ctx->deadline() - std::chrono::system_clock::now();
  if (left < std::chrono::hours(24 * 365)) {
    t = std::min(t, absl::FromChrono(left));
  }
  return std::max(t, absl::ZeroDuration());
}

}  // namespace

absl::Status RendezvousServiceImpl::Check(const std::string& worker_id,
                                          const std::string& token,
                                          int64_t epoch) {
  absl::Status s = membership_->CheckSession(worker_id, token);
  if (!s.ok()) return s;
  return membership_->CheckEpoch(epoch);
}

grpc::Status RendezvousServiceImpl::Set(grpc::ServerContext*,
                                        const v1::SetRequest* req,
                                        v1::SetResponse*) {
  RpcScope scope(metrics_, "Set");
  absl::Status s = Check(req->worker_id(), req->token(), req->epoch());
  if (s.ok()) s = kv_->Set(req->epoch(), req->key(), req->value());
  if (s.ok()) kv_->DropBefore(membership_->CommittedEpoch());
  return scope.Finish(ToGrpcStatus(s));
}

grpc::Status RendezvousServiceImpl::Get(grpc::ServerContext* ctx,
                                        const v1::GetRequest* req,
                                        v1::GetResponse* resp) {
  RpcScope scope(metrics_, "Get");
  absl::Status s = Check(req->worker_id(), req->token(), req->epoch());
  if (!s.ok()) return scope.Finish(ToGrpcStatus(s));
  absl::StatusOr<absl::Duration> t = Timeout(ctx, req->timeout_ms());
  if (!t.ok()) return scope.Finish(ToGrpcStatus(t.status()));
  absl::StatusOr<std::string> v = kv_->Get(
      req->epoch(), req->key(), *t, [ctx] { return ctx->IsCancelled(); });
  if (!v.ok()) return scope.Finish(ToGrpcStatus(v.status()));
  resp->set_value(*std::move(v));
  return scope.Finish(grpc::Status::OK);
}

grpc::Status RendezvousServiceImpl::Wait(grpc::ServerContext* ctx,
                                         const v1::WaitRequest* req,
                                         v1::WaitResponse*) {
  RpcScope scope(metrics_, "Wait");
  absl::Status s = Check(req->worker_id(), req->token(), req->epoch());
  if (!s.ok()) return scope.Finish(ToGrpcStatus(s));
  absl::StatusOr<absl::Duration> t = Timeout(ctx, req->timeout_ms());
  if (!t.ok()) return scope.Finish(ToGrpcStatus(t.status()));
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  s = kv_->Wait(req->epoch(), keys, *t, [ctx] { return ctx->IsCancelled(); });
  return scope.Finish(ToGrpcStatus(s));
}

}  // namespace zshard::server
