// RunLoad: join phase (a few threads, blocking calls), then a scheduler
// thread that fires each worker's heartbeat at its slot of the interval as
// a callback-API call and records the round-trip latency.

#include "tools/loadgen/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "tools/loadgen/cpu_usage.h"
#include "tools/loadgen/plan_watcher.h"
#include "zshard/v1/dashboard_service.grpc.pb.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::loadgen {
namespace {

using SteadyClock = std::chrono::steady_clock;

// One connection: a follower of the leader and a stub per address it has
// used. Stubs live as long as the connection (calls in flight use them).
// Thread-safe.
class Connection {
 public:
  explicit Connection(std::shared_ptr<net::LeaderFollower> follower)
      : follower_(std::move(follower)) {}

  net::LeaderFollower& follower() { return *follower_; }

  // The stub of `pick`'s address.
  v1::WorkerService::Stub* Stub(const net::LeaderFollower::Pick& pick) {
    absl::MutexLock lock(&mu_);
    if (stubs_.size() <= pick.index) stubs_.resize(pick.index + 1);
    if (stubs_[pick.index] == nullptr) {
      stubs_[pick.index] = v1::WorkerService::NewStub(pick.channel);
    }
    return stubs_[pick.index].get();
  }

 private:
  const std::shared_ptr<net::LeaderFollower> follower_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

struct SimWorker {
  // Joins, the plan watch and acks.
  Connection* connection = nullptr;
  // Heartbeats (the same connection unless RunLoad was given others).
  Connection* beats = nullptr;
  std::string worker_id;
  std::string token;
  std::unique_ptr<PlanWatcher> watcher;
  // The connection's generation the watch was opened at.
  uint64_t watch_generation = 0;
  // Set when the coordinator refused a heartbeat as DEAD, fenced or
  // unknown (counted once).
  std::atomic<bool> fenced{false};
  bool killed = false;
};

std::chrono::system_clock::time_point DeadlineIn(int64_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// The highest epoch number the leading coordinator used so far (committed
// or pending); -1 when it cannot be asked.
int64_t LatestEpoch(net::LeaderFollower& coordinators) {
  v1::GetClusterStatusResponse response;
  const grpc::Status status = net::CallOnLeader(
      coordinators,
      [] {
        auto context = std::make_unique<grpc::ClientContext>();
        context->set_deadline(DeadlineIn(30000));
        return context;
      },
      [&response](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context) {
        return v1::DashboardService::NewStub(channel)->GetClusterStatus(
            context, v1::GetClusterStatusRequest(), &response);
      });
  if (!status.ok()) return -1;
  return std::max(response.epoch(), response.pending_epoch());
}

// Joins every worker with callback-API calls, at most `window` in flight
// (a completion starts the next join), as a storm of real workers would.
class Joiner : public std::enable_shared_from_this<Joiner> {
 public:
  Joiner(const LoadOptions& options, std::vector<SimWorker>* workers)
      : options_(options), workers_(workers) {}

  // Returns once every join finished; the failures.
  int64_t Run(int window) {
    const int n = static_cast<int>(workers_->size());
    for (int k = 0; k < std::min(window, n); ++k) Next();
    absl::MutexLock lock(&mu_);
    auto all = [this, n]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == n; };
    mu_.Await(absl::Condition(&all));
    return failures_;
  }

 private:
  struct Call {
    int index = 0;
    // Joins tried for this worker so far.
    int attempt = 0;
    net::LeaderFollower::Pick pick;
    grpc::ClientContext context;
    v1::JoinRequest request;
    v1::JoinResponse response;
  };

  // Starts the next join, if any is left.
  void Next() {
    int i = 0;
    {
      absl::MutexLock lock(&mu_);
      if (next_ >= static_cast<int>(workers_->size())) return;
      i = next_++;
    }
    Start(i, 0);
  }

  // Starts worker i's join (attempt `attempt`) on its connection's current
  // coordinator.
  void Start(int i, int attempt) {
    auto call = std::make_shared<Call>();
    call->index = i;
    call->attempt = attempt;
    call->request.set_name(absl::StrCat(options_.name_prefix, i));
    call->request.set_address(absl::StrCat("127.0.0.1:", 20000 + i));
    (*call->request.mutable_labels())["node"] = absl::StrCat("node-", i / 8);
    call->request.mutable_device()->set_kind("cpu");
    call->context.set_deadline(DeadlineIn(30000));
    Connection* connection = (*workers_)[i].connection;
    call->pick = connection->follower().Current();
    connection->Stub(call->pick)
        ->async()
        ->Join(&call->context, &call->request, &call->response,
               [self = shared_from_this(), call](grpc::Status status) {
                 self->Done(*call, status);
               });
  }

  void Done(const Call& call, const grpc::Status& status) {
    const int index = call.index;
    const v1::JoinResponse& response = call.response;
    SimWorker& w = (*workers_)[index];
    // Not the leader there (a standby, or gone): try where the connection
    // moved, each address and redirect once (as net::CallOnLeader does).
    if (!status.ok()) {
      net::LeaderFollower& follower = w.connection->follower();
      const net::LeaderFollower::Move move =
          follower.OnFailure(call.pick, status, call.context, true);
      const bool moved = move != net::LeaderFollower::Move::kStayed ||
                         follower.Current().generation != call.pick.generation;
      const int limit = 2 * static_cast<int>(follower.size()) + 1;
      if (moved && call.attempt + 1 < limit) {
        return Start(index, call.attempt + 1);
      }
    }
    if (status.ok()) {
      w.worker_id = response.worker_id();
      w.token = response.token();
    }
    {
      absl::MutexLock lock(&mu_);
      ++done_;
      if (!status.ok()) ++failures_;
    }
    Next();
  }

  const LoadOptions& options_;
  std::vector<SimWorker>* const workers_;
  absl::Mutex mu_;
  int next_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
};

// Tracks heartbeats in flight so the run can drain them at the end.
// One simulated heartbeat, completed on the heartbeat queue (see
// HeartbeatQueue): what to record when its answer comes.
struct HeartbeatCall {
  net::LeaderFollower::Pick pick;
  grpc::ClientContext context;
  v1::HeartbeatRequest request;
  v1::HeartbeatResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::HeartbeatResponse>>
      reader;
  SteadyClock::time_point sent;
  SimWorker* worker = nullptr;
  LatencyStats* sink = nullptr;
  std::atomic<int64_t>* ok_count = nullptr;      // null while warming up
  std::atomic<int64_t>* failed_count = nullptr;  // null while warming up
};

// Heartbeat answers are taken on threads of their own, so that the time
// measured is the coordinator's and not the wait behind this process's
// plan-stream reads and acks (which run on gRPC's callback threads).
class HeartbeatQueue {
 public:
  // `done(call)` runs for each answered call, which is then deleted.
  explicit HeartbeatQueue(std::function<void(HeartbeatCall&)> done)
      : done_(std::move(done)) {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        void* tag = nullptr;
        bool ok = false;
        while (cq_.Next(&tag, &ok)) {
          auto* call = static_cast<HeartbeatCall*>(tag);
          done_(*call);
          delete call;
        }
      });
    }
  }
  ~HeartbeatQueue() {
    cq_.Shutdown();
    for (std::thread& t : threads_) t.join();
  }
  // Sends `call` on `stub`; it is the queue's from now on.
  void Send(v1::WorkerService::Stub* stub, HeartbeatCall* call) {
    call->reader = stub->AsyncHeartbeat(&call->context, call->request, &cq_);
    call->reader->Finish(&call->response, &call->status, call);
  }

 private:
  const std::function<void(HeartbeatCall&)> done_;
  grpc::CompletionQueue cq_;
  std::vector<std::thread> threads_;
};

class InFlight {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  void Done() {
    absl::MutexLock lock(&mu_);
    --count_;
  }
  // Every call has a deadline, so this returns.
  void WaitZero() {
    absl::MutexLock lock(&mu_);
    auto zero = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ == 0; };
    mu_.Await(absl::Condition(&zero));
  }

 private:
  absl::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

double CpuSecondsOr(pid_t pid, double fallback) {
  auto seconds = ProcessCpuSeconds(pid);
  return seconds.ok() ? *seconds : fallback;
}

}  // namespace

absl::StatusOr<LoadReport> RunLoad(
    const LoadOptions& options,
    const std::vector<std::shared_ptr<net::LeaderFollower>>& connections,
    const std::vector<std::shared_ptr<net::LeaderFollower>>&
        heartbeat_connections) {
  if (connections.empty()) {
    return absl::InvalidArgumentError("no connections");
  }
  std::vector<std::unique_ptr<Connection>> links;
  for (const auto& follower : connections) {
    links.push_back(std::make_unique<Connection>(follower));
  }
  std::vector<std::unique_ptr<Connection>> beat_links;
  for (const auto& follower : heartbeat_connections) {
    beat_links.push_back(std::make_unique<Connection>(follower));
  }
  LoadReport report;
  report.workers = options.workers;
  const int64_t epoch_before = LatestEpoch(*connections.front());
  std::vector<SimWorker> workers(std::max(0, options.workers));
  for (size_t i = 0; i < workers.size(); ++i) {
    workers[i].connection = links[i % links.size()].get();
    workers[i].beats = beat_links.empty()
                           ? workers[i].connection
                           : beat_links[i % beat_links.size()].get();
  }

  // Join.
  const auto join_start = SteadyClock::now();
  report.join_failures = std::make_shared<Joiner>(options, &workers)
                             ->Run(std::max(1, options.joins_in_flight));
  report.join_seconds =
      std::chrono::duration<double>(SteadyClock::now() - join_start).count();
  std::vector<SimWorker*> joined;
  for (SimWorker& w : workers) {
    if (!w.worker_id.empty()) joined.push_back(&w);
  }
  report.workers_joined = static_cast<int>(joined.size());
  if (joined.empty()) {
    return absl::UnavailableError("no simulated worker could join");
  }

  WatchCounters counters;
  // Watches left behind on a coordinator a connection moved away from;
  // cancelled, waited for at the end. The scheduler thread's only.
  std::vector<std::unique_ptr<PlanWatcher>> retired;
  // Opens w's watch on its connection's current coordinator.
  auto watch = [&counters](SimWorker* w) {
    const net::LeaderFollower::Pick pick = w->connection->follower().Current();
    w->watcher = std::make_unique<PlanWatcher>(
        w->connection->Stub(pick), w->worker_id, w->token, &counters);
    w->watch_generation = pick.generation;
    w->watcher->Start();
  };
  if (options.watch_plans) {
    for (SimWorker* w : joined) watch(w);
  }

  // Heartbeats: worker k fires at start + round*interval + k*interval/n;
  // those sent before measure_start count as warm-up.
  LatencyStats stats;
  LatencyStats warmup_stats;
  InFlight in_flight;
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
  HeartbeatQueue heartbeats([&in_flight](HeartbeatCall& call) {
    const grpc::StatusCode code = call.status.error_code();
    if (code == grpc::StatusCode::UNAUTHENTICATED ||
        code == grpc::StatusCode::NOT_FOUND) {
      call.worker->fenced.store(true);
    }
    // A standby or a lost coordinator: the connection's next heartbeats
    // go where the follower moves.
    call.worker->beats->follower().OnFailure(call.pick, call.status,
                                             call.context, true);
    if (call.status.ok()) {
      call.sink->Add(std::chrono::duration_cast<std::chrono::microseconds>(
                         SteadyClock::now() - call.sent)
                         .count());
      if (call.ok_count != nullptr) call.ok_count->fetch_add(1);
    } else if (call.failed_count != nullptr) {
      call.failed_count->fetch_add(1);
    }
    in_flight.Done();
  });
  const auto start = SteadyClock::now();
  const auto measure_start =
      start + std::chrono::milliseconds(options.warmup_ms);
  const auto end =
      measure_start + std::chrono::milliseconds(options.duration_ms);
  const auto interval = std::chrono::milliseconds(options.heartbeat_ms);
  const size_t n = joined.size();
  double cpu0 = -1;
  double self0 = -1;
  bool measuring = false;
  for (int64_t round = 0;; ++round) {
    bool finished = false;
    for (size_t k = 0; k < n; ++k) {
      auto due = start + round * interval + interval * k / n;
      if (due >= end) {
        finished = true;
        break;
      }
      std::this_thread::sleep_until(due);
      if (!measuring && due >= measure_start) {
        measuring = true;
        cpu0 = CpuSecondsOr(options.coordinator_pid, -1);
        self0 = CpuSecondsOr(0, -1);
        // The killed workers go silent at once, watches included.
        for (size_t v = 0; v < n && static_cast<int>(v) < options.kill; ++v) {
          joined[v]->killed = true;
          if (joined[v]->watcher != nullptr) joined[v]->watcher->Cancel();
        }
      }
      if (joined[k]->killed) continue;
      auto* call = new HeartbeatCall;
      call->context.set_deadline(DeadlineIn(5000));
      call->request.set_worker_id(joined[k]->worker_id);
      call->request.set_token(joined[k]->token);
      call->sent = SteadyClock::now();
      call->sink = measuring ? &stats : &warmup_stats;
      call->ok_count = measuring ? &ok : nullptr;
      call->failed_count = measuring ? &failed : nullptr;
      in_flight.Add();
      SimWorker* worker = joined[k];
      call->worker = worker;
      call->pick = worker->beats->follower().Current();
      // The connection moved (a failover): the watch follows, as a real
      // worker's does.
      if (worker->watcher != nullptr &&
          worker->watch_generation !=
              worker->connection->follower().Current().generation) {
        worker->watcher->Cancel();
        retired.push_back(std::move(worker->watcher));
        watch(worker);
      }
      heartbeats.Send(worker->beats->Stub(call->pick), call);
    }
    if (finished) break;
  }
  in_flight.WaitZero();
  const double wall =
      std::chrono::duration<double>(SteadyClock::now() - measure_start).count();
  const double cpu1 = CpuSecondsOr(options.coordinator_pid, -1);
  const double self1 = CpuSecondsOr(0, -1);
  report.duration_seconds = wall;
  report.warmup_seconds = options.warmup_ms / 1000.0;
  if (options.coordinator_pid > 0 && cpu0 >= 0 && cpu1 >= 0) {
    report.coordinator_cpu_percent = 100.0 * (cpu1 - cpu0) / wall;
  }
  if (self0 >= 0 && self1 >= 0) {
    report.loadgen_cpu_percent = 100.0 * (self1 - self0) / wall;
  }
  const int64_t epoch_after = LatestEpoch(*connections.front());
  if (epoch_before >= 0 && epoch_after >= 0) {
    report.proposals = epoch_after - epoch_before;
  }
  for (SimWorker* w : joined) report.fenced += w->fenced.load() ? 1 : 0;
  report.heartbeats_ok = ok.load();
  report.heartbeats_failed = failed.load();
  report.latency = stats.Summarize();
  report.warmup_latency = warmup_stats.Summarize();

  for (SimWorker* w : joined) {
    if (w->watcher != nullptr) w->watcher->Cancel();
  }
  for (SimWorker* w : joined) {
    if (w->watcher != nullptr) w->watcher->WaitDone();
  }
  for (const auto& w : retired) w->WaitDone();
  report.plan_updates = counters.updates.load();
  report.acks = counters.acks.load();
  report.ack_failures = counters.ack_failures.load();

  if (options.leave) {
    for (SimWorker* w : joined) {
      if (w->killed) continue;
      v1::LeaveRequest request;
      request.set_worker_id(w->worker_id);
      request.set_token(w->token);
      request.set_reason("loadgen done");
      v1::LeaveResponse response;
      net::CallOnLeader(
          w->connection->follower(),
          [] {
            auto context = std::make_unique<grpc::ClientContext>();
            context->set_deadline(DeadlineIn(2000));
            return context;
          },
          [&](const std::shared_ptr<grpc::Channel>& channel,
              grpc::ClientContext* context) {
            return v1::WorkerService::NewStub(channel)->Leave(context, request,
                                                              &response);
          })
          .ok();
    }
  }
  return report;
}

nlohmann::json LoadReport::ToJson() const {
  return {{"workers", workers},
          {"joined", workers_joined},
          {"join_seconds", join_seconds},
          {"heartbeats_ok", heartbeats_ok},
          {"heartbeats_failed", heartbeats_failed},
          {"p50_ms", latency.p50_ms},
          {"p99_ms", latency.p99_ms},
          {"warmup_p99_ms", warmup_latency.p99_ms},
          {"fenced", fenced},
          {"proposals", proposals},
          {"coordinator_cpu_percent", coordinator_cpu_percent},
          {"loadgen_cpu_percent", loadgen_cpu_percent}};
}

std::string LoadReport::ToText() const {
  std::string out = absl::StrFormat(
      "workers joined     %d (%d failed) in %.2f s\n"
      "heartbeats         %d ok, %d failed in %.1f s\n"
      "latency ms         p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n"
      "warm-up %.0f s       %d heartbeats, p50 %.3f  p99 %.3f  max %.3f ms\n"
      "plan updates       %d, acks %d (%d failed)\n"
      "fenced             %d, proposals %d\n",
      workers_joined, join_failures, join_seconds, heartbeats_ok,
      heartbeats_failed, duration_seconds, latency.p50_ms, latency.p90_ms,
      latency.p99_ms, latency.max_ms, warmup_seconds, warmup_latency.count,
      warmup_latency.p50_ms, warmup_latency.p99_ms, warmup_latency.max_ms,
      plan_updates, acks, ack_failures, fenced, proposals);
  if (coordinator_cpu_percent >= 0) {
    absl::StrAppendFormat(&out, "coordinator cpu    %.1f %% of one core\n",
                          coordinator_cpu_percent);
  }
  absl::StrAppendFormat(&out, "loadgen cpu        %.1f %% of one core\n",
                        loadgen_cpu_percent);
  return out;
}

}  // namespace zshard::loadgen
