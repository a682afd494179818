// The key-value store under every rendezvous (Gloo's pairs, NCCL's unique
// id). Implementations: an in-process store for tests and a client of the
// coordinator's rendezvous service, namespaced by job and epoch, for workers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::comm {

// A key-value store shared by the ranks of one rendezvous. Keys are already
// scoped by the caller (e.g. "group/intra0/rank3"); implementations add
// their own namespace (job, epoch). Thread-safe.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // Stores `value` under `key`, replacing any previous value.
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Returns the value of `key`, blocking until it exists or `timeout_ms`
  // passes (DeadlineExceeded). Unavailable when the store cannot be reached.
  virtual absl::StatusOr<std::string> Get(absl::string_view key,
                                          int64_t timeout_ms) = 0;

  // Blocks until every key exists (OK) or `timeout_ms` passes
  // (DeadlineExceeded).
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            int64_t timeout_ms) = 0;

  // True once the rendezvous on this store is cancelled (its epoch was
  // abandoned): a communicator being created on it stops connecting and
  // fails with Aborted promptly. Default: never.
  virtual bool cancelled() const { return false; }
};

}  // namespace zshard::comm
