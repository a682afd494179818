// Telemetry the coordinator keeps per worker: a bounded ring of the latest
// step reports (WorkerService.StreamTelemetry) and summaries over it, for
// the dashboard, zshardctl top and the per-rank metrics.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zshard::server {

struct TelemetryOptions {
  // Reports kept per worker (the ring's size). Default 120.
  int window = 120;
  // Workers tracked; past it the one silent longest is forgotten.
  // Default 10000.
  int max_workers = 10000;
  // Phases and memory categories kept per report (the rest are dropped)
  // and the longest name kept (longer ones are cut). Defaults 16 and 64.
  int max_keys = 16;
  int max_key_len = 64;
};

// One step report as kept.
struct TelemetryPoint {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t time_ms = 0;  // coordinator clock at receipt
  std::vector<std::pair<std::string, double>> phases;  // name, ms
  // The phase named "step" when reported, else the sum of the phases.
  double step_ms = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  std::map<std::string, int64_t> memory_bytes;
  double loss = 0;
  double grad_norm = 0;
  bool skipped = false;
};

// A worker's telemetry: the latest report and means over the ring.
struct TelemetrySnapshot {
  std::string worker_id;
  int64_t reports = 0;  // received in total
  TelemetryPoint latest;
  double mean_step_ms = 0;
  // Mean per phase over the ring, in the latest report's phase order.
  std::vector<std::pair<std::string, double>> mean_phases;
  // Bytes sent + received per second between the oldest and the latest
  // kept report (0 with fewer than two, or no time between them).
  double bytes_per_s = 0;
  std::vector<TelemetryPoint> samples;  // oldest first, as requested
};

// Thread-safe. Memory is bounded by window x max_workers reports of at
// most 2 x max_keys entries each.
class TelemetryStore {
 public:
  explicit TelemetryStore(TelemetryOptions options = {});

  // Keeps `point` as the latest report of `worker_id` (names cut and
  // entries dropped past the limits; step_ms recomputed: the phase named
  // "step" when there is one, else the sum of the phases).
  void Record(const std::string& worker_id, TelemetryPoint point);

  // The worker's snapshot with its last `samples` reports (0: none);
  // nullopt when it never reported.
  std::optional<TelemetrySnapshot> Get(const std::string& worker_id,
                                       int samples);

  // Forgets the worker (e.g. fenced or gone).
  void Forget(const std::string& worker_id);

  // Workers with telemetry.
  int size();

 private:
  struct Ring {
    int64_t reports = 0;
    std::deque<TelemetryPoint> points;
  };
  const TelemetryOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Ring> rings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::server
