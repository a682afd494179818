// Gloo's rendezvous::Store over a KvStore, with every key namespaced by the
// group's name. get() blocks until the key exists, because Gloo's
// connectFullMesh reads peers' addresses without waiting for them first.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/kv_store.h"
#include "gloo/rendezvous/store.h"

namespace zshard::comm {

// Thread-safe. Gloo's interface reports failures by throwing: every method
// throws gloo::IoException on failure and remembers the failure, which
// the communicator's creation turns back into a Status (first_error()).
class GlooKvStore final : public gloo::rendezvous::Store {
 public:
  // `store` must outlive this object. Keys become "gloo/<group>/<key>".
  GlooKvStore(KvStore* store, std::string group, int64_t timeout_ms);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first failure seen, or OK.
  absl::Status first_error() const;

 private:
  std::string Key(const std::string& key) const;
  [[noreturn]] void Fail(const absl::Status& status);

  KvStore* const store_;
  const std::string prefix_;
  const int64_t timeout_ms_;
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zshard::comm
