// AbortableStore: a KvStore that forwards to another but waits in short
// slices, so a rendezvous blocked on a peer that never comes ends promptly
// (Aborted) once an abort flag is raised, instead of at its timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "client/worker/comm/kv_store.h"

namespace zshard::reshard {

// Thread-safe when the inner store is. Does not own `inner` or `aborted`;
// both must outlive it.
class AbortableStore final : public comm::KvStore {
 public:
  // Waits are cut into slices of at most `slice_ms` (default 100 ms).
  AbortableStore(comm::KvStore* inner, const std::atomic<bool>* aborted,
                 int64_t slice_ms = 100);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  // As the inner store's, or Aborted once the flag is raised.
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override;
  // True once the flag is raised.
  bool cancelled() const override;

 private:
  // Runs op(slice_ms) until it stops returning DeadlineExceeded, the flag
  // is raised or `timeout_ms` has passed.
  template <typename Op>
  auto Sliced(int64_t timeout_ms, Op op) -> decltype(op(int64_t{0}));

  comm::KvStore* const inner_;
  const std::atomic<bool>* const aborted_;
  const int64_t slice_ms_;
};

}  // namespace zshard::reshard
