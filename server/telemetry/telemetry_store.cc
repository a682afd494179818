// TelemetryStore: bounded rings and their summaries.
#include "server/telemetry/telemetry_store.h"

#include <algorithm>

namespace zshard::server {

TelemetryStore::TelemetryStore(TelemetryOptions options) : options_(options) {}

void TelemetryStore::Record(const std::string& worker_id,
                            TelemetryPoint point) {
  const size_t max_keys = static_cast<size_t>(std::max(1, options_.max_keys));
  const size_t max_len = static_cast<size_t>(std::max(1, options_.max_key_len));
  if (point.phases.size() > max_keys) point.phases.resize(max_keys);
  // The whole step is the phase named "step" when the worker reports one
  // (its other phases may overlap), else the sum of the phases.
  point.step_ms = 0;
  double total = -1;
  for (auto& [name, ms] : point.phases) {
    if (name.size() > max_len) name.resize(max_len);
    if (name == "step") {
      total = ms;
    } else {
      point.step_ms += ms;
    }
  }
  if (total >= 0) point.step_ms = total;
  std::map<std::string, int64_t> memory;
  for (const auto& [name, bytes] : point.memory_bytes) {
    if (memory.size() >= max_keys) break;
    memory[name.substr(0, max_len)] += bytes;
  }
  point.memory_bytes = std::move(memory);

  absl::MutexLock lock(&mu_);
  if (rings_.find(worker_id) == rings_.end() &&
      static_cast<int>(rings_.size()) >= std::max(1, options_.max_workers)) {
    // Forget the worker silent longest to make room.
    auto oldest = rings_.begin();
    for (auto it = rings_.begin(); it != rings_.end(); ++it) {
      if (it->second.points.back().time_ms <
          oldest->second.points.back().time_ms) {
        oldest = it;
      }
    }
    rings_.erase(oldest);
  }
  Ring& ring = rings_[worker_id];
  ++ring.reports;
  ring.points.push_back(std::move(point));
  while (static_cast<int>(ring.points.size()) > std::max(1, options_.window)) {
    ring.points.pop_front();
  }
}

std::optional<TelemetrySnapshot> TelemetryStore::Get(
    const std::string& worker_id, int samples) {
  absl::MutexLock lock(&mu_);
  auto it = rings_.find(worker_id);
  if (it == rings_.end() || it->second.points.empty()) return std::nullopt;
  const std::deque<TelemetryPoint>& points = it->second.points;
  TelemetrySnapshot s;
  s.worker_id = worker_id;
  s.reports = it->second.reports;
  s.latest = points.back();
  std::map<std::string, std::pair<double, int>> phase_sums;
  int64_t bytes = 0;
  for (const TelemetryPoint& p : points) {
    s.mean_step_ms += p.step_ms;
    for (const auto& [name, ms] : p.phases) {
      auto& [sum, n] = phase_sums[name];
      sum += ms;
      ++n;
    }
    // The oldest report's bytes happened before the measured interval.
    if (&p != &points.front()) bytes += p.bytes_sent + p.bytes_received;
  }
  s.mean_step_ms /= static_cast<double>(points.size());
  for (const auto& [name, ms] : s.latest.phases) {
    const auto& [sum, n] = phase_sums[name];
    s.mean_phases.emplace_back(name, sum / n);
  }
  int64_t span_ms = points.back().time_ms - points.front().time_ms;
  if (points.size() >= 2 && span_ms > 0) {
    s.bytes_per_s =
        static_cast<double>(bytes) * 1000.0 / static_cast<double>(span_ms);
  }
  size_t n = std::min(points.size(), static_cast<size_t>(std::max(0, samples)));
  s.samples.assign(points.end() - static_cast<std::ptrdiff_t>(n), points.end());
  return s;
}

void TelemetryStore::Forget(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  rings_.erase(worker_id);
}

int TelemetryStore::size() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(rings_.size());
}

}  // namespace zshard::server
