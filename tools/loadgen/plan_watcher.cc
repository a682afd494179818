// PlanWatcher: read, ack if listed, read again.

#include "tools/loadgen/plan_watcher.h"

#include <chrono>
#include <memory>
#include <utility>

namespace zshard::loadgen {

PlanWatcher::PlanWatcher(v1::WorkerService::Stub* stub, std::string worker_id,
                         std::string token, WatchCounters* counters)
    : stub_(stub),
      worker_id_(std::move(worker_id)),
      token_(std::move(token)),
      counters_(counters) {
  request_.set_worker_id(worker_id_);
  request_.set_token(token_);
}

void PlanWatcher::Start() {
  stub_->async()->WatchPlan(&context_, &request_, this);
  StartRead(&update_);
  StartCall();
}

void PlanWatcher::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows.
  counters_->updates.fetch_add(1, std::memory_order_relaxed);
  bool listed = false;
  for (const v1::Assignment& a : update_.assignments()) {
    if (a.worker_id() == worker_id_) listed = true;
  }
  if (listed && update_.phase() == v1::PLAN_PHASE_PROPOSED) {
    Ack(update_.epoch(), v1::ACK_PHASE_PREPARED, 0);
  } else if (listed && update_.phase() == v1::PLAN_PHASE_COMMITTED) {
    Ack(update_.epoch(), v1::ACK_PHASE_ACTIVE, update_.resume_step());
  }
  StartRead(&update_);
}

void PlanWatcher::OnDone(const grpc::Status& /*status*/) { done_.Notify(); }

void PlanWatcher::Ack(int64_t epoch, v1::AckPhase phase, int64_t step) {
  struct Call {
    grpc::ClientContext context;
    v1::AckTransitionRequest request;
    v1::AckTransitionResponse response;
  };
  auto call = std::make_shared<Call>();
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(10));
  call->request.set_worker_id(worker_id_);
  call->request.set_token(token_);
  call->request.set_epoch(epoch);
  call->request.set_phase(phase);
  call->request.set_step(step);
  call->request.set_commit_point_passed(true);
  WatchCounters* counters = counters_;
  stub_->async()->AckTransition(
      &call->context, &call->request, &call->response,
      [call, counters](grpc::Status status) {
        (status.ok() ? counters->acks : counters->ack_failures)
            .fetch_add(1, std::memory_order_relaxed);
      });
}

}  // namespace zshard::loadgen
