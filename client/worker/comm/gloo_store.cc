// GlooKvStore: Gloo's rendezvous store on a KvStore.
#include "client/worker/comm/gloo_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace zshard::comm {

GlooKvStore::GlooKvStore(KvStore* store, std::string group, int64_t timeout_ms)
    : store_(store),
      prefix_(absl::StrCat("gloo/", group, "/")),
      timeout_ms_(timeout_ms) {}

std::string GlooKvStore::Key(const std::string& key) const {
  return prefix_ + key;
}

void GlooKvStore::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  throw gloo::IoException(std::string(status.message()));
}

void GlooKvStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s =
      store_->Set(Key(key), absl::string_view(data.data(), data.size()));
  if (!s.ok()) Fail(s);
}

std::vector<char> GlooKvStore::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(Key(key), timeout_ms_);
  if (!value.ok()) {
    Fail(absl::Status(value.status().code(),
                      absl::StrCat("rendezvous of '", prefix_,
                                   "': ", value.status().message())));
  }
  return std::vector<char>(value->begin(), value->end());
}

void GlooKvStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(timeout_ms_));
}

void GlooKvStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& k : keys) full.push_back(Key(k));
  const int64_t ms = timeout.count() > 0
                         ? std::min<int64_t>(timeout.count(), timeout_ms_)
                         : timeout_ms_;
  absl::Status s = store_->Wait(full, ms);
  if (!s.ok()) {
    Fail(absl::Status(s.code(), absl::StrCat("rendezvous of '", prefix_,
                                             "': ", s.message())));
  }
}

absl::Status GlooKvStore::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

}  // namespace zshard::comm
