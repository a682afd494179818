// Leader election: campaign key, lease renewal, lowest create revision.
#include "server/store/leader_election.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace zshard::server {
namespace {

// A campaign key's value: the id, then " http=HOST:PORT" when published.
constexpr char kHttpField[] = " http=";

std::string KeyValue(const LeaderElectionOptions& o) {
  return o.http.empty() ? o.id : absl::StrCat(o.id, kHttpField, o.http);
}

// The id and the HTTP address of a campaign key's value (a value of an
// older candidate is its id alone).
std::pair<std::string, std::string> ParseKeyValue(const std::string& value) {
  const size_t at = value.find(kHttpField);
  if (at == std::string::npos) return {value, ""};
  return {value.substr(0, at), value.substr(at + sizeof(kHttpField) - 1)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::Campaign(
    LeaderElectionOptions options) {
  while (!options.prefix.empty() && options.prefix.back() == '/') {
    options.prefix.pop_back();
  }
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError("election prefix is empty");
  }
  if (options.id.empty() || options.id.find(' ') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "election candidate id '", options.id, "' is empty or has a space"));
  }
  if (options.ttl_s < 1 || options.poll_interval_ms < 1) {
    return absl::InvalidArgumentError(
        "election ttl_s and poll_interval_ms must be positive");
  }
  ZSHARD_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                          EtcdClient::Create(options.client));
  std::unique_ptr<LeaderElection> e(
      new LeaderElection(std::move(options), std::move(client)));
  ZSHARD_RETURN_IF_ERROR(e->PutKey());
  e->Step();
  e->thread_ = std::thread([raw = e.get()] { raw->Loop(); });
  return e;
}

LeaderElection::LeaderElection(LeaderElectionOptions options,
                               std::unique_ptr<EtcdClient> client)
    : options_(std::move(options)),
      election_prefix_(options_.prefix + "/election/"),
      client_(std::move(client)) {}

LeaderElection::~LeaderElection() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  Resign().IgnoreError();
}

absl::Status LeaderElection::PutKey() {
  ZSHARD_ASSIGN_OR_RETURN(int64_t lease, client_->Grant(options_.ttl_s));
  const std::string key =
      absl::StrCat(election_prefix_, absl::StrFormat("%016x", lease));
  EtcdCompare absent;
  absent.key = key;
  absent.target = EtcdCompare::Target::kCreate;
  absent.number = 0;
  ZSHARD_ASSIGN_OR_RETURN(
      EtcdTxnResult r,
      client_->Txn({absent}, {EtcdOp::Put(key, KeyValue(options_), lease)}));
  if (!r.succeeded) {
    return absl::InternalError(
        absl::StrCat("election key '", key, "' exists already"));
  }
  absl::MutexLock lock(&mu_);
  lease_ = lease;
  key_ = key;
  create_revision_ = r.revision;  // the txn's revision created the key
  last_renewal_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

void LeaderElection::Step() {
  int64_t lease = 0;
  bool renew = false;
  bool resigned = false;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
    resigned = resigned_;
    renew = renewing_ && std::chrono::steady_clock::now() - last_renewal_ >=
                             std::chrono::seconds(options_.ttl_s) / 3;
  }
  if (resigned) return;
  if (renew) {
    absl::StatusOr<int64_t> ttl = client_->KeepAlive(lease);
    if (ttl.ok()) {
      absl::MutexLock lock(&mu_);
      last_renewal_ = std::chrono::steady_clock::now();
    } else if (ttl.status().code() == absl::StatusCode::kNotFound) {
      {
        absl::MutexLock lock(&mu_);
        // The lease expired: the key is gone.
        if (leading_) {
          loss_reason_ =
              absl::StrCat("its lease ", lease, " expired or was revoked");
        }
        leading_ = false;
        if (resigned_) return;
      }
      if (!PutKey().ok()) return;  // campaign again at the next step
    }
  }
  absl::StatusOr<EtcdRangeResult> keys = client_->RangePrefix(election_prefix_);
  absl::MutexLock lock(&mu_);
  if (!keys.ok()) {
    // etcd unreachable: the lease may be expiring unseen.
    if (std::chrono::steady_clock::now() - last_renewal_ >=
        std::chrono::seconds(options_.ttl_s)) {
      if (leading_) {
        loss_reason_ = absl::StrCat(
            "etcd could not be read for its lease "
            "TTL (",
            options_.ttl_s, " s): ", keys.status().message());
      }
      leading_ = false;
      candidates_.clear();
    }
    return;
  }
  candidates_.clear();
  for (const EtcdKeyValue& kv : keys->kvs) {
    auto [id, http] = ParseKeyValue(kv.value);
    candidates_.push_back(
        Candidate{std::move(id), std::move(http), kv.create_revision,
                  kv.key == key_ && kv.create_revision == create_revision_});
  }
  std::sort(candidates_.begin(), candidates_.end(),
            [](const Candidate& a, const Candidate& b) {
              return a.create_revision < b.create_revision;
            });
  const bool leading =
      !resigned_ && !candidates_.empty() && candidates_.front().self;
  if (leading_ && !leading) {
    loss_reason_ =
        resigned_ ? "it resigned"
        : candidates_.empty() ||
                !std::any_of(candidates_.begin(), candidates_.end(),
                             [](const Candidate& c) { return c.self; })
            ? absl::StrCat("its campaign key ", key_,
                           " is gone (its lease expired or was revoked)")
            : absl::StrCat("the key of ", candidates_.front().id,
                           " has a lower create revision");
  }
  leading_ = leading;
}

void LeaderElection::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                           absl::Milliseconds(options_.poll_interval_ms));
      if (stopping_) return;
    }
    Step();
  }
}

bool LeaderElection::WaitForLeadership(absl::Duration timeout) {
  // absl's timed waits end at a wall-clock time: a step forward of the
  // wall clock would end this one early, so the deadline is steady.
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  absl::MutexLock lock(&mu_);
  while (!leading_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    mu_.AwaitWithTimeout(absl::Condition(&leading_), absl::FromChrono(left));
  }
  return leading_;
}

bool LeaderElection::leading() {
  absl::MutexLock lock(&mu_);
  return leading_;
}

LeaderElection::Fence LeaderElection::fence() {
  absl::MutexLock lock(&mu_);
  return Fence{key_, create_revision_};
}

std::optional<LeaderElection::Fence> LeaderElection::LeadingFence() {
  absl::MutexLock lock(&mu_);
  if (!leading_) return std::nullopt;
  return Fence{key_, create_revision_};
}

int64_t LeaderElection::lease() {
  absl::MutexLock lock(&mu_);
  return lease_;
}

absl::StatusOr<std::string> LeaderElection::Leader() {
  ZSHARD_ASSIGN_OR_RETURN(EtcdRangeResult keys,
                          client_->RangePrefix(election_prefix_));
  const EtcdKeyValue* first = nullptr;
  for (const EtcdKeyValue& kv : keys.kvs) {
    if (first == nullptr || kv.create_revision < first->create_revision) {
      first = &kv;
    }
  }
  return first == nullptr ? std::string() : ParseKeyValue(first->value).first;
}

std::vector<LeaderElection::Candidate> LeaderElection::Candidates() {
  absl::MutexLock lock(&mu_);
  return candidates_;
}

std::string LeaderElection::LossReason() {
  absl::MutexLock lock(&mu_);
  return loss_reason_;
}

absl::Status LeaderElection::Resign() {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    if (resigned_) return absl::OkStatus();
    resigned_ = true;
    leading_ = false;
    lease = lease_;
  }
  return client_->Revoke(lease);
}

absl::Status LeaderElection::Yield(const std::string& why) {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    if (resigned_) return absl::OkStatus();
    if (leading_) loss_reason_ = why;
    leading_ = false;
    lease = lease_;
    // Renew at the next step: the revoked lease is found gone and a new
    // key is put.
    last_renewal_ = std::chrono::steady_clock::time_point();
  }
  return client_->Revoke(lease);
}

void LeaderElection::StopRenewing() {
  absl::MutexLock lock(&mu_);
  renewing_ = false;
}

}  // namespace zshard::server
