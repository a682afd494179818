// zshard-worker: the worker daemon. Parses flags, connects to the
// coordinator and runs the session until the job is done, the worker is
// drained or fenced, or SIGTERM/SIGINT asks it to leave.
//
// Exit status: 0 done, drained, or stopped by a signal (after handing its
// optimizer state over when it held some); 1 fenced, a job the coordinator
// failed, a failed training workload or a fatal error (e.g. the metrics
// port cannot be bound); 2 bad flags.

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "client/worker/device/device_spec.h"
#include "client/worker/session/coordinator_session.h"
#include "client/worker/session/health_server.h"
#include "client/worker/session/worker_flags.h"
#include "common/logging.h"
#include "common/mutex_mode.h"
#include "common/net/leader_follower.h"

namespace {

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int ExitStatus(const absl::StatusOr<zshard::worker::SessionOutcome>& outcome,
               const std::string& failure_reason) {
  using zshard::worker::SessionOutcome;
  if (!outcome.ok()) {
    ZSHARD_LOG_ERROR("worker failed",
                     {{"error", std::string(outcome.status().message())}});
    return 1;
  }
  switch (*outcome) {
    case SessionOutcome::kDone:
      ZSHARD_LOG_INFO("job done, exiting");
      return 0;
    case SessionOutcome::kStopped:
      ZSHARD_LOG_INFO("stopped, exiting");
      return 0;
    case SessionOutcome::kDrained:
      ZSHARD_LOG_INFO("state handed over, exiting");
      return 0;
    case SessionOutcome::kFenced:
      ZSHARD_LOG_ERROR("fenced by the coordinator, exiting");
      return 1;
    case SessionOutcome::kFailed:
      ZSHARD_LOG_ERROR("training failed, exiting", {{"error", failure_reason}});
      return 1;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  zshard::SetBinaryMutexMode();
  using zshard::worker::CoordinatorSession;
  auto flags = zshard::worker::ParseWorkerFlags(
      std::vector<std::string>(argv + 1, argv + argc), GetEnv);
  if (!flags.ok()) {
    std::fprintf(stderr, "zshard-worker: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(zshard::worker::WorkerUsage().c_str(), stdout);
    return 0;
  }
  zshard::SetLogFormat(flags->log_format);
  // A worker asked for a GPU never trains on the CPU instead.
  const absl::Status usable =
      zshard::device::CheckDeviceUsable(flags->session.train.engine.device);
  if (!usable.ok()) {
    std::fprintf(stderr, "zshard-worker: %s\n",
                 std::string(usable.message()).c_str());
    return 2;
  }

  // Signals are taken by one thread with sigwait, so the handler does no
  // work in signal context; every other thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // One channel per coordinator address; calls follow the leader.
  auto coordinators = zshard::net::LeaderFollower::Create(flags->channel);
  if (!coordinators.ok()) {
    std::fprintf(stderr, "zshard-worker: %s\n",
                 std::string(coordinators.status().message()).c_str());
    return 2;
  }
  CoordinatorSession session(flags->session, *std::move(coordinators));
  std::unique_ptr<zshard::worker::HealthServer> health;
  if (!flags->metrics_listen.empty()) {
    auto started = zshard::worker::HealthServer::Start(
        flags->metrics_listen, flags->session.name, [&session] {
          return zshard::worker::HealthSnapshot{session.alive(), session.step(),
                                                session.epoch()};
        });
    if (!started.ok()) {
      std::fprintf(stderr, "zshard-worker: %s\n",
                   std::string(started.status().message()).c_str());
      return started.status().code() == absl::StatusCode::kInvalidArgument ? 2
                                                                           : 1;
    }
    health = *std::move(started);
    ZSHARD_LOG_INFO("metrics listening",
                    {{"port", std::to_string(health->port())}});
  }
  std::thread([&session, signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) == 0) {
      ZSHARD_LOG_INFO("signal received, leaving",
                      {{"signal", std::to_string(signal)}});
      session.Stop();
    }
  }).detach();

  // Exit with std::exit rather than return, so `session` is never destroyed
  // under the detached signal thread.
  const auto outcome = session.Run();
  std::exit(ExitStatus(outcome, session.failure_reason()));
}
