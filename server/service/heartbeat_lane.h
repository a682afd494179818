// Heartbeats on a lane of their own: the Heartbeat method on gRPC's async
// API, with a completion queue and threads that serve nothing else. On the
// callback API, heartbeats queue on gRPC's few callback threads behind
// everything else a transition brings at once (thousands of AckTransition
// calls and plan-stream writes), and a member heartbeating on time could
// wait a second for its answer; here they wait only for each other.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "zshard/v1/worker_service.grpc.pb.h"

namespace zshard::server {

// The nice increment of the coordinator's background threads (the
// blocking-call pool, the plan-watch notifier, the ticker that plans
// proposals), so that on a busy machine the lane's threads get the CPU
// first (LowerThisThreadPriority).
inline constexpr int kBackgroundNice = 5;

// Thread-safe. Attach (before the server is built), Start (after it
// started), Stop (after it was shut down, before it is destroyed): once
// each, in that order; Stop alone is fine too.
class HeartbeatLane {
 public:
  using Writer = grpc::ServerAsyncResponseWriter<v1::HeartbeatResponse>;
  // Asks the server for the next Heartbeat call (the service's
  // RequestHeartbeat) on `cq`, completing with `tag`.
  using Request =
      std::function<void(grpc::ServerContext*, v1::HeartbeatRequest*, Writer*,
                         grpc::ServerCompletionQueue* cq, void* tag)>;
  // Answers one heartbeat.
  using Answer = std::function<grpc::Status(const v1::HeartbeatRequest&,
                                            v1::HeartbeatResponse*)>;

  // `threads` serve the lane (at least 1); `pending` calls are asked for
  // ahead (at least 1).
  HeartbeatLane(Request request, Answer answer, int threads = 2,
                int pending = 256);
  ~HeartbeatLane();
  HeartbeatLane(const HeartbeatLane&) = delete;
  HeartbeatLane& operator=(const HeartbeatLane&) = delete;

  // Adds the lane's completion queue to `builder`.
  void Attach(grpc::ServerBuilder* builder);
  // Asks for the first calls and starts the threads.
  void Start();
  // Ends the lane: no call is asked for any more, the queue is shut down
  // and drained, the threads joined. Idempotent.
  void Stop();

 private:
  struct Call;
  // Asks for one more call unless stopping.
  void Ask();
  void Loop();

  const Request request_;
  const Answer answer_;
  const int threads_;
  const int pending_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::vector<std::thread> workers_;
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zshard::server
