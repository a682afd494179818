// A coordinator that zshard-loadgen starts itself for `--job FILE|PRESET`:
// a child zshard-coordinator on a free port of 127.0.0.1 with a state dir
// of its own (or the store given), its metrics on another free port,
// stopped (SIGTERM, then SIGKILL) when this object goes away.
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
  // The coordinator's --store (e.g. etcd:127.0.0.1:2379/zshard/loadgen).
  // Empty (default): SQLite in a temp dir of its own.
  std::string store;
};

// The coordinator's state store writes so far (its zshard_store_*_total
// metrics): membership changes and the transactions that wrote them.
struct StoreWrites {
  int64_t changes = 0;
  int64_t transactions = 0;
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
  // Read from its metrics endpoint; Unavailable when it does not answer,
  // Internal when a metric is missing.
  absl::StatusOr<StoreWrites> ReadStoreWrites() const;

  // The JSON of a job for `preset` under `options` (see above).
  static std::string PresetJob(const std::string& preset,
                               const LocalCoordinatorOptions& options);

 private:
  LocalCoordinator() = default;

  std::string dir_;
  std::string address_;
  int metrics_port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace zshard::loadgen
