// IdleRunner: a stepping thread that waits step_delay_ms between steps on
// a condition, so Pause and the destructor never wait for a delay to end.

#include "client/worker/runner/idle_runner.h"

#include "absl/time/time.h"

namespace zshard::worker {

IdleRunner::IdleRunner(const Options& options) : options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

IdleRunner::~IdleRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IdleRunner::Activate(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
  active_ = true;
  ++generation_;
}

int64_t IdleRunner::Pause() {
  // A step is one locked increment, so holding the lock is a step boundary.
  absl::MutexLock lock(&mu_);
  active_ = false;
  ++generation_;
  return step_;
}

void IdleRunner::OnProposed(int64_t, int64_t) {}

EpochStart IdleRunner::OnEpochCommitted(const EpochInfo&) {
  return EpochStart::kReady;
}

void IdleRunner::OnEpochStable(int64_t) {}

PreparedState IdleRunner::prepared_state() const {
  PreparedState state;
  state.step = step();
  state.adam_step = state.step;
  return state;
}

void IdleRunner::Abort() {}

absl::Status IdleRunner::failure() const { return absl::OkStatus(); }

int64_t IdleRunner::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

bool IdleRunner::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool IdleRunner::done() const {
  absl::MutexLock lock(&mu_);
  return options_.steps > 0 && step_ >= options_.steps;
}

bool IdleRunner::WaitDone(int64_t timeout_ms) const {
  absl::MutexLock lock(&mu_);
  auto is_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return options_.steps > 0 && step_ >= options_.steps;
  };
  mu_.AwaitWithTimeout(absl::Condition(&is_done),
                       absl::Milliseconds(timeout_ms));
  return is_done();
}

void IdleRunner::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    auto can_step = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ ||
             (active_ && (options_.steps == 0 || step_ < options_.steps));
    };
    mu_.Await(absl::Condition(&can_step));
    if (stopping_) break;
    // Wait out the delay unless something changes (pause, re-activation,
    // stop); then step only if still allowed to.
    const int64_t generation = generation_;
    auto changed = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || generation_ != generation;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&changed),
                             absl::Milliseconds(options_.step_delay_ms))) {
      continue;
    }
    ++step_;
  }
}

}  // namespace zshard::worker
