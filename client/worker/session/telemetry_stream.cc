// TelemetryStream: StepTelemetry -> TelemetryReport, and the client stream.

#include "client/worker/session/telemetry_stream.h"

#include <utility>

#include "common/logging.h"

namespace zshard::worker {
namespace {

void AddPhase(v1::TelemetryReport& report, const char* phase, double seconds) {
  v1::PhaseTime* p = report.add_phase_times();
  p->set_phase(phase);
  p->set_ms(seconds * 1e3);
}

}  // namespace

v1::TelemetryReport MakeTelemetryReport(int64_t epoch,
                                        const engine::StepTelemetry& t) {
  v1::TelemetryReport report;
  report.set_epoch(epoch);
  report.set_step(t.step);
  AddPhase(report, "gradients", t.times.gradients);
  AddPhase(report, "reduce_scatter", t.times.reduce_scatter);
  AddPhase(report, "inter_allreduce", t.times.inter_allreduce);
  AddPhase(report, "commit", t.times.commit);
  AddPhase(report, "adam", t.times.adam);
  AddPhase(report, "all_gather", t.times.all_gather);
  AddPhase(report, "waiting", t.times.waiting);
  AddPhase(report, "step", t.times.step);
  report.set_bytes_sent(t.bytes_sent);
  report.set_bytes_received(t.bytes_received);
  auto& memory = *report.mutable_memory_bytes();
  memory["param"] = t.memory.param;
  memory["grad"] = t.memory.grad;
  memory["master"] = t.memory.master;
  memory["exp_avg"] = t.memory.exp_avg;
  memory["exp_avg_sq"] = t.memory.exp_avg_sq;
  memory["comm"] = t.memory.comm;
  if (t.has_loss) report.set_loss(t.loss);
  report.set_grad_norm(t.grad_norm);
  report.set_skipped(t.outcome == engine::StepOutcome::kSkipped);
  return report;
}

TelemetryStream::TelemetryStream(
    std::shared_ptr<net::LeaderFollower> coordinators,
    std::function<Credentials()> credentials)
    : coordinators_(std::move(coordinators)),
      credentials_(std::move(credentials)) {}

TelemetryStream::~TelemetryStream() { Close(); }

void TelemetryStream::Send(int64_t epoch, const engine::StepTelemetry& t) {
  v1::TelemetryReport report = MakeTelemetryReport(epoch, t);
  const Credentials credentials = credentials_();
  report.set_worker_id(credentials.worker_id);
  report.set_token(credentials.token);
  const net::LeaderFollower::Pick current = coordinators_->Current();
  absl::MutexLock lock(&mu_);
  // The follower moved (the coordinator went away or stepped down): drop
  // the stream without waiting for its answer.
  if (writer_ != nullptr && pick_.generation != current.generation) {
    context_->TryCancel();
    writer_->Finish();
    writer_.reset();
    context_.reset();
  }
  if (writer_ == nullptr) {
    pick_ = current;
    stub_ = v1::WorkerService::NewStub(pick_.channel);
    context_ = std::make_unique<grpc::ClientContext>();
    response_.Clear();
    writer_ = stub_->StreamTelemetry(context_.get(), &response_);
  }
  if (writer_->Write(report)) {
    if (warned_) ZSHARD_LOG_INFO("telemetry stream restored");
    warned_ = false;
    return;
  }
  grpc::Status status = writer_->Finish();
  coordinators_->OnFailure(pick_, status, *context_);
  writer_.reset();
  context_.reset();
  if (!warned_) {
    ZSHARD_LOG_WARN("telemetry stream failed, training goes on",
                    {{"error", status.error_message()}});
    warned_ = true;
  }
}

void TelemetryStream::Close() {
  absl::MutexLock lock(&mu_);
  CloseLocked();
}

void TelemetryStream::CloseLocked() {
  if (writer_ == nullptr) return;
  writer_->WritesDone();
  grpc::Status status = writer_->Finish();
  if (!status.ok()) {
    ZSHARD_LOG_WARN("telemetry stream closed with an error",
                    {{"error", status.error_message()}});
  }
  writer_.reset();
  context_.reset();
}

}  // namespace zshard::worker
