// CoordinatorKvStore: request building and deadlines; status conversion
// goes through common/grpc_status.

#include "client/worker/session/coordinator_kv_store.h"

#include <algorithm>
#include <chrono>

#include "common/grpc_status.h"
#include "grpcpp/client_context.h"

namespace zshard::worker {
namespace {

void SetDeadline(grpc::ClientContext* context, int64_t ms) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(std::max<int64_t>(ms, 1)));
}

}  // namespace

CoordinatorKvStore::CoordinatorKvStore(const Options& options,
                                       std::shared_ptr<grpc::Channel> channel)
    : options_(options), stub_(v1::RendezvousService::NewStub(channel)) {}

absl::Status CoordinatorKvStore::Set(absl::string_view key,
                                     absl::string_view value) {
  v1::SetRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_token(options_.token);
  request.set_epoch(options_.epoch);
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  v1::SetResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, options_.rpc_margin_ms);
  return FromGrpcStatus(stub_->Set(&context, request, &response));
}

absl::StatusOr<std::string> CoordinatorKvStore::Get(absl::string_view key,
                                                    int64_t timeout_ms) {
  v1::GetRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_token(options_.token);
  request.set_epoch(options_.epoch);
  request.set_key(std::string(key));
  request.set_timeout_ms(std::max<int64_t>(timeout_ms, 0));
  v1::GetResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout_ms + options_.rpc_margin_ms);
  grpc::Status status = stub_->Get(&context, request, &response);
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
  request.set_timeout_ms(std::max<int64_t>(timeout_ms, 0));
  v1::WaitResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout_ms + options_.rpc_margin_ms);
  return FromGrpcStatus(stub_->Wait(&context, request, &response));
}

}  // namespace zshard::worker
