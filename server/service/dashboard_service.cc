// DashboardService adapter: status and explain (the plan:
// dashboard_plan.cc).
#include "server/service/dashboard_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "server/service/proto_convert.h"
#include "server/service/rpc_scope.h"
#include "server/views/explain.h"

namespace zshard::server {

grpc::Status DashboardServiceImpl::GetClusterStatus(
    grpc::ServerContext*, const v1::GetClusterStatusRequest*,
    v1::GetClusterStatusResponse* resp) {
  RpcScope scope(metrics_, "GetClusterStatus");
  ToProto(membership_->View(), resp);
  const plan::ParallelSizes& sizes = membership_->spec().parallel;
  if (sizes.model_parallel()) {
    resp->mutable_parallel()->set_tensor(sizes.tensor);
    resp->mutable_parallel()->set_pipeline(sizes.pipeline);
    resp->mutable_parallel()->set_context(sizes.context);
  }
  if (election_) {
    ElectionView view = election_();
    resp->set_leader(view.leader);
    resp->set_leader_http(view.leader_http);
    for (std::string& s : view.standbys) resp->add_standbys(std::move(s));
  }
  return scope.Finish(grpc::Status::OK);
}

void DashboardServiceImpl::WarmPlan() {
  EpochPlan committed = membership_->CommittedPlan();
  if (committed.epoch == 0) return;
  // Cached once built.
  if (membership_->spec().parallel.model_parallel()) {
    (void)plans_.GetParallel(committed);
  } else {
    (void)plans_.Get(committed);
  }
}

grpc::Status DashboardServiceImpl::Explain(grpc::ServerContext*,
                                           const v1::ExplainRequest*,
                                           v1::ExplainResponse* resp) {
  RpcScope scope(metrics_, "Explain");
  EventPage page = membership_->events()->After(
      std::max<int64_t>(0, membership_->events()->last_seq() - 64), 64);
  const ClusterView view = membership_->View();
  const job::JobSpec& spec = membership_->spec();
  for (const std::string& s : ExplainParallel(view, spec)) {
    resp->add_sentences(s);
  }
  for (const std::string& s :
       ExplainCluster(view, spec.world, page.events, spec.transition_settle_ms,
                      spec.parallel.model_parallel())) {
    resp->add_sentences(s);
  }
  return scope.Finish(grpc::Status::OK);
}

}  // namespace zshard::server
