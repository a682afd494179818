// The in-process KvStore.
#include "client/worker/comm/memory_kv_store.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace zshard::comm {

absl::Status MemoryKvStore::Set(absl::string_view key,
                                absl::string_view value) {
  absl::MutexLock lock(&mu_);
  values_[std::string(key)] = std::string(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> MemoryKvStore::Get(absl::string_view key,
                                               int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return values_.find(key) != values_.end();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&present),
                            absl::Milliseconds(timeout_ms))) {
    return absl::DeadlineExceededError(absl::StrCat(
        "key '", key, "' did not appear within ", timeout_ms, " ms"));
  }
  return values_.find(key)->second;
}

absl::Status MemoryKvStore::Wait(const std::vector<std::string>& keys,
                                 int64_t timeout_ms) {
  absl::MutexLock lock(&mu_);
  auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& k : keys) {
      if (values_.find(k) == values_.end()) return false;
    }
    return true;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&all_present),
                            absl::Milliseconds(timeout_ms))) {
    return absl::DeadlineExceededError(
        absl::StrCat("keys did not all appear within ", timeout_ms, " ms"));
  }
  return absl::OkStatus();
}

size_t MemoryKvStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

}  // namespace zshard::comm
