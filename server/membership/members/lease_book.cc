// LeaseBook: the lookup and session check of the heartbeat path.
#include "server/membership/members/lease_book.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/membership/members/token.h"

namespace zshard::server {

void LeaseBook::Put(std::shared_ptr<MemberLease> lease) {
  absl::MutexLock lock(&mu_);
  const std::string id = lease->worker_id;
  by_id_[id] = std::move(lease);
}

void LeaseBook::Erase(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  by_id_.erase(worker_id);
}

std::shared_ptr<MemberLease> LeaseBook::Find(
    const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(worker_id);
  return it == by_id_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<MemberLease>> LeaseBook::Session(
    const std::string& worker_id, const std::string& token) const {
  if (worker_id.empty()) {
    return absl::InvalidArgumentError("worker_id is missing");
  }
  if (worker_id.size() > 256) {
    return absl::InvalidArgumentError("worker_id is too long");
  }
  std::shared_ptr<MemberLease> lease;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(worker_id);
    if (it != by_id_.end()) lease = it->second;
  }
  if (lease == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is unknown"));
  }
  if (token.empty() || !TokensEqual(token, lease->token)) {
    return absl::UnauthenticatedError(
        absl::StrCat("token of worker '", worker_id, "' is invalid"));
  }
  return lease;
}

}  // namespace zshard::server
