// StepEngine: the step (reduce-scatter, commit point, Adam, all-gather) and
// the completion of a step left pending at its commit point.
#include "client/worker/engine/step_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/gradient_stream.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

const char* StepOutcomeName(StepOutcome outcome) {
  switch (outcome) {
    case StepOutcome::kApplied:
      return "applied";
    case StepOutcome::kSkipped:
      return "skipped";
    case StepOutcome::kFailedBeforeCommit:
      return "failed_before_commit";
    case StepOutcome::kFailedAfterCommit:
      return "failed_after_commit";
  }
  return "invalid";
}

void StepEngine::CountTraffic(StepTelemetry& t) const {
  const int i = config_.plan.instances;
  int64_t bytes = 0, elements = 0;
  for (const WindowState& w : buffers_->windows()) {
    const plan::BufferKey& key = buffers_->buffers()[w.buffer].key;
    // D for dense buffers, D / E for expert ones.
    const int d = config_.plan.buffers[w.buffer].shard_group_size;
    const int64_t gb = plan::DTypeBytes(key.grad_dtype);
    const int64_t pb = plan::DTypeBytes(key.param_dtype);
    const int64_t s = w.size();
    // Reduce-scatter and all-gather: (D-1) blocks of s out and in.
    elements += 2 * (d - 1) * s;
    bytes += (d - 1) * s * (gb + pb);
    // All-reduce across instances: 2(I-1)/I x the owned slice.
    elements += 2 * (i - 1) * s / i;
    bytes += 2 * (i - 1) * s * gb / i;
  }
  t.bytes_sent = t.bytes_received = bytes;
  t.elements_sent = t.elements_received = elements;
}

absl::Status StepEngine::ReduceGradients(StepTelemetry& t,
                                         GradientStream* stream) {
  const std::vector<WindowState>& windows = buffers_->windows();
  // The last step's deferred all-gathers use the same communicators.
  if (absl::Status gathered = JoinGathers(); !gathered.ok()) {
    return absl::Status(gathered.code(),
                        absl::StrCat("the all-gather of step ", step_,
                                     "'s params failed: ", gathered.message()));
  }
  double seconds = 0;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const WindowState& w = windows[wi];
    const int window = static_cast<int>(wi);
    if (stream != nullptr) ZSHARD_RETURN_IF_ERROR(stream->WaitReady(window));
    const auto r0 = Clock::now();
    absl::Status status;
    comm::Communicator* group = groups_.shard_group(w.buffer);
    if (group != nullptr) {
      BufferState& b = buffers_->buffers()[w.buffer];
      const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
      const plan::Bucket& bucket =
          config_.plan.buffers[w.buffer].buckets[w.bucket];
      status = group->ReduceScatter(
          b.grads.at(bucket.start * gb), b.grads.at(w.start * gb), w.size(),
          CommType(b.key.grad_dtype), comm::ReduceOp::kSum);
    }
    seconds += Since(r0);
    if (stream != nullptr) stream->Done(window, status.ok());
    ZSHARD_RETURN_IF_ERROR(status);
  }
  t.times.reduce_scatter = seconds;
  // Windows a restarted producer's replacement overwrote come back first.
  if (stream != nullptr) ZSHARD_RETURN_IF_ERROR(stream->WaitRestored());
  const auto t0 = Clock::now();
  comm::Communicator* inter = groups_.inter();
  for (const WindowState& w : buffers_->windows()) {
    if (inter == nullptr) break;
    BufferState& b = buffers_->buffers()[w.buffer];
    const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
    ZSHARD_RETURN_IF_ERROR(inter->AllReduce(b.grads.at(w.start * gb), w.size(),
                                            CommType(b.key.grad_dtype),
                                            comm::ReduceOp::kSum));
  }
  t.times.inter_allreduce = Since(t0);
  return absl::OkStatus();
}

absl::StatusOr<double> StepEngine::StreamGradients(Workload& workload,
                                                   Reduction& reduction) {
  GradientStream stream(buffers_.get());
  StepTelemetry t;
  std::thread reducer(
      [&]() { reduction.status = ReduceGradients(t, &stream); });
  absl::StatusOr<double> loss =
      workload.StreamGradients(step_ + 1, *buffers_, stream);
  if (loss.ok()) {
    absl::Status finished = stream.Finish();
    if (!finished.ok()) loss = finished;
  }
  if (!loss.ok()) {
    // Wakes the reducer, and ends a reduce-scatter in flight.
    stream.Cancel();
    Abort();
  }
  reducer.join();
  reduction.reduce_scatter = t.times.reduce_scatter;
  reduction.inter_allreduce = t.times.inter_allreduce;
  reduction.discard = stream.discarded();
  return loss;
}

absl::StatusOr<StepEngine::CommitArray> StepEngine::Commit(double local_loss,
                                                           bool stop_requested,
                                                           bool discard,
                                                           StepTelemetry& t) {
  const auto t0 = Clock::now();
  // Per segment, in window order, added up here in that order: every
  // device sums alike (device.h), so the norm is bit-identical.
  double nonfinite = 0, sq = 0;
  std::vector<device::GradStats> stats;
  for (const WindowState& w : buffers_->windows()) {
    const BufferState& b = buffers_->buffers()[w.buffer];
    const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
    stats.resize(w.segments.size());
    ZSHARD_RETURN_IF_ERROR(buffers_->device().SumSquares(
        b.grads.at(w.start * gb), b.key.grad_dtype, w.segments, w.size(),
        absl::MakeSpan(stats)));
    for (size_t i = 0; i < stats.size(); ++i) {
      const device::GradStats& s = stats[i];
      nonfinite += static_cast<double>(s.nonfinite);
      if (!SkipsInNorm(w.pieces[i].param_index)) sq += s.sum_squares;
    }
  }
  // A discarded step counts as non-finite, so every rank skips it.
  if (discard) nonfinite += 1;
  // Every instance holds the same reduced gradients: divide by I so the
  // world sum counts each element once (a dense element is owned by one
  // rank per instance, an expert element of each expert-parallel rank by
  // one rank per instance too). The loss comes from disjoint samples on
  // every rank, so it is summed as is. The stop flag rides along, so
  // stopping at a common step costs no extra collective.
  CommitArray values = {
      static_cast<float>(nonfinite / config_.plan.instances),
      static_cast<float>(sq / config_.plan.instances),
      config_.counts_loss ? static_cast<float>(local_loss) : 0.0f,
      stop_requested ? 1.0f : 0.0f};
  // Over the whole world: the instance, then across instances, then (in a
  // model-parallel job) across slots.
  comm::Communicator* const groups[] = {groups_.intra(), groups_.inter(),
                                        groups_.across()};
  if (groups[0] != nullptr || groups[1] != nullptr || groups[2] != nullptr) {
    device::Device& dev = buffers_->device();
    void* reduced = commit_buffer_.data();
    const int64_t bytes = static_cast<int64_t>(sizeof(values));
    ZSHARD_RETURN_IF_ERROR(dev.CopyToDevice(reduced, values.data(), bytes));
    for (comm::Communicator* group : groups) {
      if (group == nullptr) continue;
      ZSHARD_RETURN_IF_ERROR(group->AllReduce(
          reduced, kCommitValues, comm::DataType::kFp32, comm::ReduceOp::kSum));
    }
    ZSHARD_RETURN_IF_ERROR(dev.CopyToHost(values.data(), reduced, bytes));
  }
  if (options_.commit_fault) ZSHARD_RETURN_IF_ERROR(options_.commit_fault());
  t.times.commit = Since(t0);
  return values;
}

absl::Status StepEngine::AllGather(int w) {
  const WindowState& win = buffers_->windows()[w];
  BufferState& b = buffers_->buffers()[win.buffer];
  const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
  const plan::Bucket& bucket =
      config_.plan.buffers[win.buffer].buckets[win.bucket];
  return groups_.shard_group(win.buffer)
      ->AllGather(b.params.at(win.start * pb), b.params.at(bucket.start * pb),
                  win.size(), CommType(b.key.param_dtype));
}

absl::Status StepEngine::UpdateAndGather(StepTelemetry& t, bool gather) {
  // The rate of this training step (step_ already counts it).
  optim::AdamHyper hyper = hyper_;
  hyper.lr = job::LearningRate(config_.optimizer.lr_schedule,
                               config_.optimizer.lr, step_);
  t.lr = hyper.lr;
  ZSHARD_ASSIGN_OR_RETURN(
      const optim::AdamStepParams params,
      optim::MakeAdamStepParams(
          hyper, adam_step_ + 1,
          optim::GradScale(static_cast<double>(global_batch_), t.grad_norm,
                           config_.optimizer.clip_grad_norm)));
  absl::Status gather_status;
  std::future<std::pair<absl::Status, double>> pending;
  auto wait_pending = [&]() {
    if (!pending.valid()) return;
    const auto w0 = Clock::now();
    auto [status, seconds] = pending.get();
    t.times.waiting += Since(w0);
    t.times.all_gather += seconds;
    if (!status.ok() && gather_status.ok()) gather_status = status;
  };
  std::vector<WindowState>& windows = buffers_->windows();
  for (size_t w = 0; w < windows.size(); ++w) {
    WindowState& win = windows[w];
    BufferState& b = buffers_->buffers()[win.buffer];
    const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
    const int64_t pb = plan::DTypeBytes(b.key.param_dtype);
    const auto a0 = Clock::now();
    // A bad segment table is a broken invariant of the plan: the state of
    // earlier windows has advanced, so report it as after the commit. The
    // window's params must be complete before its all-gather reads them.
    const int wi = static_cast<int>(w);
    absl::Status adam_status = adam_->Update(
        params, win.segments, buffers_->master(wi),
        buffers_->state(StateArray::kExpAvg, wi),
        buffers_->state(StateArray::kExpAvgSq, wi), b.grads.at(win.start * gb),
        b.key.grad_dtype, b.params.at(win.start * pb), b.key.param_dtype,
        win.size());
    if (adam_status.ok()) adam_status = adam_->Synchronize();
    t.times.adam += Since(a0);
    if (!adam_status.ok()) {
      return absl::InternalError(absl::StrCat("step engine: adam of window ", w,
                                              ": ", adam_status.message()));
    }
    // Gathers run one at a time (one operation per communicator), each
    // overlapping the next window's Adam.
    wait_pending();
    if (!gather || defer_gather_ ||
        groups_.shard_group(win.buffer) == nullptr || !gather_status.ok()) {
      continue;
    }
    auto gather = [this, wi]() {
      const auto g0 = Clock::now();
      absl::Status s = AllGather(wi);
      return std::make_pair(std::move(s), Since(g0));
    };
    if (options_.overlap_all_gather) {
      pending = std::async(std::launch::async, gather);
    } else {
      auto [status, seconds] = gather();
      t.times.all_gather += seconds;
      if (!status.ok()) gather_status = status;
    }
  }
  wait_pending();
  // overlap_param_gather: Step starts them once the trainer has the result.
  gathers_deferred_ = gather && defer_gather_;
  return gather_status;
}

StepResult StepEngine::Step(Workload& workload, bool stop_requested) {
  commit_pending_ = false;  // the gradients are about to be overwritten
  gathers_deferred_ = false;
  const auto g0 = Clock::now();
  // With a streaming workload the reduce-scatters run during Gradients.
  std::optional<Reduction> reduction;
  if (workload.streams_gradients()) reduction.emplace();
  absl::StatusOr<double> loss = reduction.has_value()
                                    ? StreamGradients(workload, *reduction)
                                    : workload.Gradients(step_ + 1, *buffers_);
  const double gradient_seconds = Since(g0);
  StepResult result;
  if (!loss.ok()) {
    Abort();
    result.status = groups_.NameEpochPeer(loss.status());
    result.telemetry.step = step_ + 1;
    result.telemetry.outcome = StepOutcome::kFailedBeforeCommit;
    result.telemetry.adam_step = adam_step_;
    result.telemetry.skipped_steps = skipped_steps_;
  } else {
    defer_gather_ = workload.defers_param_gather();
    result = StepOnBuffers(workload.global_batch(), *loss, workload.has_loss(),
                           stop_requested,
                           reduction.has_value() ? &*reduction : nullptr);
    const StepTelemetry& t = result.telemetry;
    StepReport report;
    report.step = t.step;
    report.ok = result.status.ok();
    report.applied = t.outcome == StepOutcome::kApplied;
    report.grad_norm = t.grad_norm;
    report.has_loss = t.has_loss;
    report.loss = t.loss;
    // Another process reads the params next (a trainer): nothing of the
    // step may still be in flight on the device.
    if (report.ok && buffers_->shared_buffers() != nullptr) {
      const absl::Status synced = buffers_->device().Synchronize();
      if (!synced.ok()) {
        report.ok = false;
        result.status = synced;
      }
    }
    if (report.ok && gathers_deferred_) {
      report.deferred_gathers = static_cast<int>(buffers_->windows().size());
    }
    workload.StepFinished(report);
    if (report.deferred_gathers > 0) StartGathers(workload);
  }
  result.telemetry.times.gradients = gradient_seconds;
  return result;
}

StepResult StepEngine::StepOnBuffers(int64_t global_batch, double local_loss,
                                     bool has_loss, bool stop_requested,
                                     const Reduction* reduced) {
  commit_pending_ = false;
  StepResult result;
  StepTelemetry& t = result.telemetry;
  t.step = step_ + 1;
  t.has_loss = has_loss;
  global_batch_ = std::max<int64_t>(1, global_batch);
  CountTraffic(t);
  t.memory = buffers_->memory();
  auto fail = [&](absl::Status status, StepOutcome outcome) {
    Abort();
    t.outcome = outcome;
    t.adam_step = adam_step_;
    t.skipped_steps = skipped_steps_;
    result.status = groups_.NameEpochPeer(std::move(status));
    return result;
  };

  const auto s0 = Clock::now();
  absl::Status status;
  if (reduced == nullptr) {
    status = ReduceGradients(t, nullptr);
  } else {
    status = reduced->status;
    t.times.reduce_scatter = reduced->reduce_scatter;
    t.times.inter_allreduce = reduced->inter_allreduce;
  }
  if (!status.ok()) {
    t.times.step = Since(s0);
    return fail(std::move(status), StepOutcome::kFailedBeforeCommit);
  }
  const bool discard = reduced != nullptr && reduced->discard;
  absl::StatusOr<CommitArray> committed =
      Commit(local_loss, stop_requested, discard, t);
  if (!committed.ok()) {
    // The reduced gradients stay in the grad buffers: the step can still
    // be finished if some rank passed this commit point.
    commit_pending_ = true;
    result.commit_pending = true;
    t.times.step = Since(s0);
    return fail(committed.status(), StepOutcome::kFailedBeforeCommit);
  }
  // Past the commit point: every rank saw the same values.
  result.commit_values.assign(committed->begin(), committed->end());
  result.stop = (*committed)[3] > 0;
  status = ApplyCommitted(*committed, t, /*gather=*/true);
  t.times.step = Since(s0);
  if (!status.ok()) return fail(std::move(status), t.outcome);
  t.adam_step = adam_step_;
  t.skipped_steps = skipped_steps_;
  return result;
}

absl::Status StepEngine::ApplyCommitted(const CommitArray& values,
                                        StepTelemetry& t, bool gather) {
  // Rounded: I replicas of count / I add up to the count.
  t.nonfinite = std::llround(values[0]);
  if (values[0] > 0 && t.nonfinite == 0) t.nonfinite = 1;
  t.loss = static_cast<double>(values[2]);
  const double sq_norm = static_cast<double>(values[1]);
  ++step_;
  const double batch = static_cast<double>(global_batch_);
  t.grad_norm = std::sqrt(std::max(0.0, sq_norm)) / batch;
  if (t.has_loss) t.loss /= batch;
  if (t.nonfinite > 0 || !std::isfinite(sq_norm)) {
    ++skipped_steps_;
    t.outcome = StepOutcome::kSkipped;
    return absl::OkStatus();
  }
  if (gather && options_.after_commit) options_.after_commit();
  const absl::Status status = UpdateAndGather(t, gather);
  ++adam_step_;
  t.outcome =
      status.ok() ? StepOutcome::kApplied : StepOutcome::kFailedAfterCommit;
  return status;
}

absl::Status StepEngine::FinishPendingStep(
    absl::Span<const double> commit_values) {
  (void)JoinGathers();
  if (!commit_pending_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step engine: no step is pending after step ", step_));
  }
  if (commit_values.size() != kCommitValues) {
    return absl::InvalidArgumentError(
        absl::StrCat("step engine: commit values have ", commit_values.size(),
                     " elements, want ", kCommitValues));
  }
  CommitArray values;
  // Exact: the values were fp32 on the rank that passed.
  for (int i = 0; i < kCommitValues; ++i) {
    values[i] = static_cast<float>(commit_values[i]);
  }
  commit_pending_ = false;
  StepTelemetry t;
  return ApplyCommitted(values, t, /*gather=*/false);
}

}  // namespace zshard::engine
