// The rendezvous of the shm transport through a KvStore: each rank
// publishes where it runs (host identity), its pid and its segment's name;
// every rank reads the same records, so all decide alike whether the group
// shares one host. Keys live under "shm/<group>/", apart from Gloo's
// "gloo/<group>/".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/worker/comm/kv_store.h"

namespace zshard::comm {

// What one rank publishes.
struct ShmPeerRecord {
  // Equal for ranks that can share memory and see each other's pids.
  std::string identity;
  int64_t pid = 0;
  // The rank's segment; empty when it could not create one.
  std::string segment;
  // Where, in the rank's address space, peers may read the segment magic to
  // find out whether they can read its memory directly.
  uint64_t probe_address = 0;
};

// This process' host identity: boot id, pid and ipc namespaces, hostname.
std::string LocalHostIdentity();

// One rank's side of the rendezvous. Not thread-safe. `store` must outlive
// it.
class ShmRendezvous {
 public:
  ShmRendezvous(KvStore* store, std::string group, int rank, int size,
                absl::Time deadline);

  // Publishes this rank's record and returns every rank's, in rank order.
  // DeadlineExceeded when a rank does not publish before the deadline,
  // Aborted within ~20 ms once the store is cancelled.
  absl::StatusOr<std::vector<ShmPeerRecord>> Exchange(
      const ShmPeerRecord& mine);

  // Publishes `value` under `name` and returns every rank's value once all
  // have published (same errors as Exchange).
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view name,
                                                     absl::string_view value);

 private:
  std::string Key(absl::string_view what, int rank) const;
  // Get that polls in short steps to honour the deadline and cancellation.
  absl::StatusOr<std::string> Get(const std::string& key);

  KvStore* const store_;
  const std::string prefix_;
  const int rank_;
  const int size_;
  const absl::Time deadline_;
};

// OK when every record has the identity of rank 0 and a segment; else
// FailedPrecondition naming the first rank that is elsewhere (or has no
// segment).
absl::Status CheckColocated(const std::vector<ShmPeerRecord>& records,
                            absl::string_view group);

}  // namespace zshard::comm
