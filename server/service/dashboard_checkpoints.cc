// DashboardService adapter: checkpoints and the reshard history.
#include "common/grpc_status.h"
#include "server/service/checkpoint_convert.h"
#include "server/service/dashboard_service.h"
#include "server/service/rpc_scope.h"

namespace zshard::server {
namespace {

constexpr int kDefaultHistory = 100;

}  // namespace

grpc::Status DashboardServiceImpl::ListCheckpoints(
    grpc::ServerContext*, const v1::ListCheckpointsRequest*,
    v1::ListCheckpointsResponse* resp) {
  RpcScope scope(metrics_, "ListCheckpoints");
  for (CheckpointRecord& c : membership_->Checkpoints()) {
    resp->add_file_count(static_cast<int>(c.files.size()));
    c.files.clear();
    ToProto(c, resp->add_checkpoints());
  }
  for (const CheckpointAttempt& a : membership_->IncompleteCheckpoints()) {
    v1::CheckpointAttempt* out = resp->add_incomplete();
    out->set_step(a.step);
    out->set_dir(a.dir);
    out->set_files_reported(a.files_reported);
    out->set_files_expected(a.files_expected);
    for (const std::string& f : a.failures) out->add_failures(f);
  }
  return scope.Finish(grpc::Status::OK);
}

grpc::Status DashboardServiceImpl::GetReshardHistory(
    grpc::ServerContext*, const v1::GetReshardHistoryRequest* req,
    v1::GetReshardHistoryResponse* resp) {
  RpcScope scope(metrics_, "GetReshardHistory");
  if (req->limit() < 0) {
    return scope.Finish(
        ToGrpcStatus(absl::InvalidArgumentError("history limit must be >= 0")));
  }
  int limit = req->limit() == 0 ? kDefaultHistory : req->limit();
  for (const ReshardRecord& r : membership_->ReshardHistory(limit)) {
    ToProto(r, resp->add_reshards());
  }
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
