// HeartbeatLane: ask for calls ahead, answer each, ask again.
#include "server/service/heartbeat_lane.h"

#include <algorithm>
#include <utility>

namespace zshard::server {

struct HeartbeatLane::Call {
  grpc::ServerContext context;
  v1::HeartbeatRequest request;
  v1::HeartbeatResponse response;
  Writer writer{&context};
  // Answered: the next completion is the answer's, and ends the call.
  bool answered = false;
};

HeartbeatLane::HeartbeatLane(Request request, Answer answer, int threads,
                             int pending)
    : request_(std::move(request)),
      answer_(std::move(answer)),
      threads_(std::max(1, threads)),
      pending_(std::max(1, pending)) {}

HeartbeatLane::~HeartbeatLane() { Stop(); }

void HeartbeatLane::Attach(grpc::ServerBuilder* builder) {
  cq_ = builder->AddCompletionQueue();
}

void HeartbeatLane::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (cq_ == nullptr || started_ || stopping_) return;
    started_ = true;
  }
  for (int i = 0; i < pending_; ++i) Ask();
  for (int i = 0; i < threads_; ++i) {
    workers_.emplace_back([this] { Loop(); });
  }
}

void HeartbeatLane::Ask() {
  // Under the lock: no call is asked for on a queue being shut down.
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  auto* call = new Call;
  request_(&call->context, &call->request, &call->writer, cq_.get(), call);
}

void HeartbeatLane::Loop() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* call = static_cast<Call*>(tag);
    if (call->answered || !ok) {
      // The answer went out, or the server is shutting down.
      delete call;
      continue;
    }
    Ask();  // the next heartbeat finds a call waiting
    const grpc::Status status = answer_(call->request, &call->response);
    call->answered = true;
    if (status.ok()) {
      call->writer.Finish(call->response, status, call);
    } else {
      call->writer.FinishWithError(status, call);
    }
  }
}

void HeartbeatLane::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (cq_ == nullptr) return;
  cq_->Shutdown();
  if (workers_.empty()) {
    // Never started: drain here.
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) delete static_cast<Call*>(tag);
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

}  // namespace zshard::server
