// An in-process KvStore: the rendezvous of ranks that run as threads of one
// process (tests, benchmarks).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/worker/comm/kv_store.h"

namespace zshard::comm {

// A map guarded by a mutex; Get and Wait block on a condition with a
// deadline. Thread-safe.
class MemoryKvStore final : public KvStore {
 public:
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override;

  // Number of keys stored (for tests).
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string, std::less<>> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::comm
