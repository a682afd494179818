// Epoch-scoped blocking key-value store.
#include "server/rendezvous/rendezvous_kv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zshard::server {

absl::StatusOr<std::unique_ptr<RendezvousKv>> RendezvousKv::Open(
    RendezvousOptions options, StateStore* store) {
  auto kv = std::make_unique<RendezvousKv>(options, store);
  if (store == nullptr) return kv;
  absl::StatusOr<RendezvousEntries> entries = store->LoadRendezvous();
  if (!entries.ok()) {
    return absl::Status(entries.status().code(),
                        absl::StrCat("cannot load the rendezvous values: ",
                                     entries.status().message()));
  }
  absl::MutexLock lock(&kv->mu_);
  for (auto& [epoch, values] : *entries) {
    for (const auto& [k, v] : values) kv->total_bytes_ += k.size() + v.size();
    kv->epochs_[epoch] = std::move(values);
  }
  return kv;
}

absl::Status RendezvousKv::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("key is missing");
  if (key.size() > options_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is longer than ", options_.max_key_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status RendezvousKv::Set(int64_t epoch, const std::string& key,
                               const std::string& value) {
  absl::Status s = CheckKey(key);
  if (!s.ok()) return s;
  if (value.size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of key '", key.substr(0, 64), "' is larger than ",
                     options_.max_value_bytes, " bytes"));
  }
  absl::MutexLock lock(&mu_);
  auto& kv = epochs_[epoch];
  auto it = kv.find(key);
  size_t old = it == kv.end() ? 0 : key.size() + it->second.size();
  if (it == kv.end() && kv.size() >= options_.max_keys_per_epoch) {
    return absl::ResourceExhaustedError(
        absl::StrCat("epoch ", epoch, " holds too many rendezvous keys"));
  }
  if (total_bytes_ - old + key.size() + value.size() >
      options_.max_total_bytes) {
    return absl::ResourceExhaustedError("rendezvous store is full");
  }
  if (store_ != nullptr) {
    // Stored before it is visible: a value a worker read survives a
    // failover.
    absl::Status stored = store_->PutRendezvous(epoch, key, value);
    if (!stored.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot store rendezvous key '", key.substr(0, 64),
                       "': ", stored.message()));
    }
  }
  total_bytes_ = total_bytes_ - old + key.size() + value.size();
  kv[key] = value;
  return absl::OkStatus();
}

bool RendezvousKv::HasAllLocked(int64_t epoch,
                                const std::vector<std::string>& keys) {
  auto e = epochs_.find(epoch);
  if (e == epochs_.end()) return keys.empty();
  for (const std::string& k : keys) {
    if (e->second.count(k) == 0) return false;
  }
  return true;
}

absl::Status RendezvousKv::WaitFor(int64_t epoch,
                                   const std::vector<std::string>& keys,
                                   absl::Duration timeout,
                                   const std::function<bool()>& cancelled) {
  timeout = std::min(timeout, absl::Milliseconds(options_.max_timeout_ms));
  absl::Time deadline = absl::Now() + timeout;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || HasAllLocked(epoch, keys);
  };
  while (!ready()) {
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous keys of epoch ", epoch, " not set in time"));
    }
    if (cancelled && cancelled()) {
      return absl::CancelledError("rendezvous wait cancelled");
    }
    mu_.AwaitWithDeadline(absl::Condition(&ready),
                          std::min(deadline, now + absl::Milliseconds(100)));
  }
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousKv::Get(
    int64_t epoch, const std::string& key, absl::Duration timeout,
    const std::function<bool()>& cancelled) {
  absl::Status s = CheckKey(key);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  s = WaitFor(epoch, {key}, timeout, cancelled);
  if (!s.ok()) return s;
  return epochs_[epoch][key];
}

absl::Status RendezvousKv::Wait(int64_t epoch,
                                const std::vector<std::string>& keys,
                                absl::Duration timeout,
                                const std::function<bool()>& cancelled) {
  if (keys.size() > options_.max_wait_keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        "more than ", options_.max_wait_keys, " keys to wait for"));
  }
  for (const std::string& k : keys) {
    absl::Status s = CheckKey(k);
    if (!s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  return WaitFor(epoch, keys, timeout, cancelled);
}

void RendezvousKv::DropBefore(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  while (!epochs_.empty() && epochs_.begin()->first < epoch) {
    for (const auto& [k, v] : epochs_.begin()->second) {
      total_bytes_ -= k.size() + v.size();
    }
    epochs_.erase(epochs_.begin());
    store_stale_ = true;
  }
  if (store_ != nullptr && store_stale_) {
    store_stale_ = !store_->DropRendezvousBefore(epoch).ok();
  }
}

void RendezvousKv::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

size_t RendezvousKv::TotalBytes() {
  absl::MutexLock lock(&mu_);
  return total_bytes_;
}

}  // namespace zshard::server
