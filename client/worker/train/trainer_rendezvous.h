// TrainerRendezvous: where a model-parallel job's trainers meet for their own
// torch.distributed groups (docs/design.md section 13). zshard does not run
// tensor or pipeline communication; it tells each trainer its position and
// a TCPStore address shared by its replica, with a generation that changes
// whenever the replica's members change.
//
// Every daemon of the replica names itself in the epoch's rendezvous store
// (a worker's plan update carries only its own assignment). The daemon at
// replica rank 0 (tp 0, cp 0, pp 0) decides: it picks a port once (a free
// one on its collectives' host unless given), reads the replica's members
// (worker ids by replica rank), keeps the generation while they stay the
// same and takes the epoch's number when they change, and publishes
// "tcp://HOST:PORT GENERATION" in the store; the replica's other daemons
// read it there. Only one daemon decides, so every trainer of the replica
// sees the same generation.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/runner/runner.h"
#include "client/worker/trainer/trainer_hub.h"
#include "common/job/job_slot.h"
#include "common/job/job_spec.h"

namespace zshard::worker {

// The position of `slot` (rendezvous fields unset).
trainer::ModelParallelStep PositionOf(const job::JobSpec& job,
                                      const job::SlotJob& slot);

class TrainerRendezvous {
 public:
  // `host`: where peers reach this daemon (and its trainer, in the same
  // pod); `port`: the TCPStore's port when this daemon's trainer hosts it,
  // 0: a free port of `host`, picked once.
  TrainerRendezvous(std::string host, int port)
      : host_(std::move(host)), port_(port) {}

  // The position of `slot` in `epoch` with its replica's init_method and
  // generation: published when this daemon is the replica's rank 0, else
  // read from `store`; each wait at most `timeout_ms` (DeadlineExceeded).
  absl::StatusOr<trainer::ModelParallelStep> Meet(const job::JobSpec& job,
                                                  const EpochInfo& epoch,
                                                  const job::SlotJob& slot,
                                                  comm::KvStore& store,
                                                  int64_t timeout_ms);

 private:
  const std::string host_;
  int port_;
  // What this daemon published last, as rank 0 of a replica.
  std::vector<std::string> members_;
  int64_t generation_ = 0;
};

}  // namespace zshard::worker
