// A coordinator that zshard-loadgen starts itself for `--job FILE|PRESET`:
// a child zshard-coordinator on a free port of 127.0.0.1 with a state dir
// of its own, stopped (SIGTERM, then SIGKILL) when this object goes away.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zshard::loadgen {

struct LocalCoordinatorOptions {
  // A job file, or a model preset name (e.g. "llama2-70b") for a job made
  // here: the synthetic workload (so proposals plan moves), I instances,
  // world [instances, max_world]. Required.
  std::string job;
  // The zshard-coordinator binary. Empty: the one next to this program.
  std::string binary;
  // For a preset job: instances, the largest world (rounded up to a
  // multiple of instances), the heartbeat and the lease. Defaults 8,
  // 16384, 2000 ms, 20000 ms.
  int instances = 8;
  int max_world = 16384;
  int64_t heartbeat_ms = 2000;
  int64_t lease_ms = 20000;
  // How long to wait for the coordinator to answer. Default 60 s.
  int64_t start_timeout_ms = 60000;
};

class LocalCoordinator {
 public:
  // Starts it and waits until its port accepts gRPC. FailedPrecondition
  // naming the problem (no binary, it exited, it did not answer in time).
  static absl::StatusOr<std::unique_ptr<LocalCoordinator>> Start(
      const LocalCoordinatorOptions& options);
  ~LocalCoordinator();

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  // The JSON of a job for `preset` under `options` (see above).
  static std::string PresetJob(const std::string& preset,
                               const LocalCoordinatorOptions& options);

 private:
  LocalCoordinator() = default;

  std::string dir_;
  std::string address_;
  pid_t pid_ = 0;
};

}  // namespace zshard::loadgen
