// Members: join validation, sessions, heartbeats, leases and suspects.
#include "server/membership/members/member_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/membership/members/token.h"

namespace zshard::server {
namespace {

constexpr size_t kMaxNameLen = 256;
constexpr size_t kMaxAddressLen = 256;
constexpr size_t kMaxLabels = 32;
constexpr size_t kMaxLabelKeyLen = 63;
constexpr size_t kMaxLabelValueLen = 256;
constexpr size_t kMaxReasonLen = 1024;

}  // namespace

absl::Status MemberTable::CheckJoinArgs(const JoinArgs& a) {
  if (a.name.empty()) return absl::InvalidArgumentError("name is missing");
  if (a.name.size() > kMaxNameLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is longer than ", kMaxNameLen, " characters"));
  }
  for (char c : a.name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "name may hold only printable ascii without spaces");
    }
  }
  if (a.address.size() > kMaxAddressLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("address is longer than ", kMaxAddressLen, " characters"));
  }
  if (a.labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than ", kMaxLabels, " labels"));
  }
  for (const auto& [k, v] : a.labels) {
    if (k.empty() || k.size() > kMaxLabelKeyLen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label key must have 1 to ", kMaxLabelKeyLen, " characters"));
    }
    if (v.size() > kMaxLabelValueLen) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label '", k, "' is longer than ", kMaxLabelValueLen, " characters"));
    }
  }
  if (a.device.kind.size() > 32 || a.device.model.size() > kMaxNameLen) {
    return absl::InvalidArgumentError("device kind or model is too long");
  }
  return absl::OkStatus();
}

std::string MemberTable::ClipReason(const std::string& s) {
  return s.size() > kMaxReasonLen ? s.substr(0, kMaxReasonLen) : s;
}

Member MemberTable::Copy(const Member& m) {
  Member c = m;
  if (m.lease != nullptr) {
    c.epoch = m.lease->epoch.load(std::memory_order_relaxed);
    c.step = m.lease->step.load(std::memory_order_relaxed);
  }
  return c;
}

void MemberTable::NewLease(Member& m, int64_t now_ms) {
  auto lease = std::make_shared<MemberLease>(m.worker_id, m.token);
  lease->last_heartbeat_ms = now_ms;
  lease->epoch = m.epoch;
  lease->step = m.step;
  lease->state = m.state;
  lease->rank = m.rank;
  m.lease = lease;
  leases_.Put(std::move(lease));
}

void MemberTable::SetState(Member& m, MemberState state) {
  m.state = state;
  m.lease->state.store(state);
  if (state == MemberState::kDraining) {
    draining_.insert(m.worker_id);
  } else {
    draining_.erase(m.worker_id);
    m.lease->drain_now.store(false);
  }
}

void MemberTable::Restore(const std::vector<Member>& stored, int64_t now_ms) {
  for (const Member& s : stored) {
    Member m = s;
    NewLease(m, now_ms);  // re-armed: one lease of grace
    if (m.state == MemberState::kDraining) draining_.insert(m.worker_id);
    if (IsLive(m.state)) live_by_name_[m.name] = m.worker_id;
    next_join_seq_ = std::max(next_join_seq_, m.join_seq + 1);
    members_[m.worker_id] = std::move(m);
  }
}

Member& MemberTable::Add(const JoinArgs& args, int64_t now_ms) {
  Member m;
  m.worker_id = NewWorkerId();
  m.token = NewToken();
  m.name = args.name;
  m.address = args.address;
  m.labels = args.labels;
  m.device = args.device;
  m.state = MemberState::kJoining;
  m.join_seq = next_join_seq_++;
  NewLease(m, now_ms);
  live_by_name_[m.name] = m.worker_id;
  const std::string id = m.worker_id;
  return members_[id] = std::move(m);
}

Member* MemberTable::Find(const std::string& worker_id) {
  auto it = members_.find(worker_id);
  return it == members_.end() ? nullptr : &it->second;
}

const Member* MemberTable::Find(const std::string& worker_id) const {
  auto it = members_.find(worker_id);
  return it == members_.end() ? nullptr : &it->second;
}

Member* MemberTable::FindLive(const std::string& name) {
  auto it = live_by_name_.find(name);
  return it == live_by_name_.end() ? nullptr : Find(it->second);
}

bool MemberTable::IsLiveId(const std::string& worker_id) const {
  const Member* m = Find(worker_id);
  return m != nullptr && IsLive(m->state);
}

absl::StatusOr<Member*> MemberTable::Session(const std::string& worker_id,
                                             const std::string& token) {
  if (worker_id.empty()) {
    return absl::InvalidArgumentError("worker_id is missing");
  }
  if (worker_id.size() > kMaxNameLen) {
    return absl::InvalidArgumentError("worker_id is too long");
  }
  Member* m = Find(worker_id);
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker '", worker_id, "' is unknown"));
  }
  if (token.empty() || !TokensEqual(token, m->token)) {
    return absl::UnauthenticatedError(
        absl::StrCat("token of worker '", worker_id, "' is invalid"));
  }
  if (!IsLive(m->state)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "worker '", m->name, "' (", worker_id, ") is ",
        MemberStateName(m->state), ": ", m->reason, "; join again"));
  }
  return m;
}

void MemberTable::Heartbeat(Member& m, int64_t epoch, int64_t step,
                            int64_t now_ms) {
  m.epoch = epoch;
  m.step = step;
  m.lease->Renew(epoch, step, now_ms);
}

void MemberTable::RaiseStep(Member& m, int64_t step) {
  m.step = std::max(m.step, step);
  m.lease->RaiseStep(step);
}

int64_t MemberTable::StepOf(const Member& m) {
  return m.lease->step.load(std::memory_order_relaxed);
}

int64_t MemberTable::SilenceMs(const Member& m, int64_t now_ms) const {
  return now_ms - m.lease->last_heartbeat_ms.load(std::memory_order_relaxed);
}

int64_t MemberTable::TickAfterPause(int64_t now_ms, int64_t gap_ms) {
  const int64_t gap = last_tick_ms_ >= 0 ? now_ms - last_tick_ms_ : 0;
  last_tick_ms_ = now_ms;
  if (gap_ms <= 0 || gap <= gap_ms) return 0;
  RearmLeases(now_ms);
  return gap;
}

void MemberTable::RearmLeases(int64_t now_ms) {
  for (auto& [id, m] : members_) {
    if (!IsLive(m.state)) continue;
    int64_t last = m.lease->last_heartbeat_ms.load();
    while (last < now_ms &&
           !m.lease->last_heartbeat_ms.compare_exchange_weak(last, now_ms)) {
    }
    m.lease->suspect_since_ms.store(-1);
  }
}

bool MemberTable::MarkGone(Member& m, MemberState state,
                           const std::string& reason) {
  if (!IsLive(m.state)) return false;
  SetState(m, state);
  m.reason = reason;
  m.lease->suspect_since_ms.store(-1);
  auto it = live_by_name_.find(m.name);
  if (it != live_by_name_.end() && it->second == m.worker_id) {
    live_by_name_.erase(it);
  }
  return true;
}

void MemberTable::MarkDraining(Member& m, const std::string& reason) {
  SetState(m, MemberState::kDraining);
  m.reason = reason;
}

std::vector<std::string> MemberTable::JoiningToSpare() {
  std::vector<std::string> changed;
  for (auto& [id, m] : members_) {
    if (m.state == MemberState::kJoining) {
      SetState(m, MemberState::kSpare);
      changed.push_back(id);
    }
  }
  return changed;
}

std::vector<std::string> MemberTable::Place(
    const std::function<int(const std::string&)>& rank_of) {
  std::vector<std::string> changed;
  for (auto& [id, m] : members_) {
    int rank = rank_of(id);
    MemberState state = m.state;
    if (rank >= 0) {
      state = MemberState::kActive;
    } else if (state == MemberState::kJoining ||
               state == MemberState::kActive) {
      state = MemberState::kSpare;
    }
    if (rank != m.rank || state != m.state) {
      m.rank = rank;
      m.lease->rank.store(rank);
      SetState(m, state);
      changed.push_back(id);
    }
  }
  return changed;
}

bool MemberTable::MarkSuspect(Member& m, int64_t now_ms) {
  int64_t none = -1;
  return m.lease->suspect_since_ms.compare_exchange_strong(none, now_ms);
}

int MemberTable::SilentCount(int64_t now_ms) const {
  int n = 0;
  for (const auto& [id, m] : members_) {
    n += IsLive(m.state) && SilentTooLong(m, now_ms) ? 1 : 0;
  }
  return n;
}

std::vector<Expiry> MemberTable::Expired(int64_t now_ms) const {
  std::vector<Expiry> out;
  for (const auto& [id, m] : members_) {
    if (!IsLive(m.state)) continue;
    const int64_t silent = SilenceMs(m, now_ms);
    const int64_t suspect_since = m.lease->suspect_since_ms.load();
    const bool unwatched = m.lease->unwatched_since_ms.load() >= 0;
    const bool confirmed =
        suspect_since >= 0 &&
        (unwatched || now_ms - suspect_since > policy_.suspect_grace_ms);
    if (silent > policy_.lease_timeout_ms) {
      out.push_back({id, absl::StrCat("member ", m.name, "'s lease expired"),
                     absl::StrCat("lease expired after ", silent,
                                  " ms without a heartbeat (lease ",
                                  policy_.lease_timeout_ms, " ms)"),
                     !confirmed});
    } else if (confirmed) {
      out.push_back({id, absl::StrCat("member ", m.name, " suspect confirmed"),
                     unwatched ? "suspect confirmed: its plan watch closed too"
                               : "suspect confirmed: no heartbeat after the "
                                 "report"});
    }
  }
  return out;
}

std::vector<std::string> MemberTable::Forget(
    int max_gone, const std::function<bool(const std::string&)>& pinned) {
  std::vector<std::string> dropped;
  // Cheap count first: this runs on every tick.
  size_t gone_count = members_.size() - live_by_name_.size();
  if (gone_count <= static_cast<size_t>(max_gone)) return dropped;
  std::vector<std::pair<int64_t, std::string>> gone;
  for (const auto& [id, m] : members_) {
    if (!IsLive(m.state) && !pinned(id)) gone.emplace_back(m.join_seq, id);
  }
  if (gone.size() <= static_cast<size_t>(max_gone)) return dropped;
  std::sort(gone.begin(), gone.end());
  size_t drop = gone.size() - max_gone;
  for (size_t i = 0; i < drop; ++i) {
    leases_.Erase(gone[i].second);
    members_.erase(gone[i].second);
    dropped.push_back(gone[i].second);
  }
  return dropped;
}

}  // namespace zshard::server
