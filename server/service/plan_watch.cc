// Callback-API WatchPlan: notifier thread, reactors, proto cache.
#include "server/service/plan_watch.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/thread_priority.h"
#include "server/membership/transition/epoch_moves.h"
#include "server/service/heartbeat_lane.h"
#include "server/service/proto_convert.h"

namespace zshard::server {

std::shared_ptr<const PlanBytesCache::EpochMoveBytes>
PlanBytesCache::MovesOfLocked(const EpochPlan& plan) {
  for (const auto& m : epoch_moves_) {
    if (m->epoch == plan.epoch && m->moves == plan.moves.size() &&
        m->bytes_moved == plan.summary.bytes_moved) {
      return m;
    }
  }
  auto out = std::make_shared<EpochMoveBytes>();
  out->epoch = plan.epoch;
  out->moves = plan.moves.size();
  out->bytes_moved = plan.summary.bytes_moved;
  if (!plan.moves.empty()) {
    // Each move encoded once as field 8 (tag, length, bytes); a member's
    // slice is its moves' encodings in index order.
    std::vector<std::string> encoded(plan.moves.size());
    v1::PlanUpdate one;
    for (size_t i = 0; i < plan.moves.size(); ++i) {
      one.clear_moves();
      ToProto(plan.moves[i], static_cast<int>(i), one.add_moves());
      encoded[i] = one.SerializeAsString();
    }
    for (const auto& [member, indices] : IndexMovesByMember(plan.moves)) {
      std::string bytes;
      for (int i : indices) bytes += encoded[i];
      out->own.emplace(member, grpc::Slice(bytes));
    }
  }
  epoch_moves_.push_back(out);
  if (epoch_moves_.size() > 2) epoch_moves_.pop_front();
  return out;
}

grpc::ByteBuffer PlanBytesCache::Get(
    const std::shared_ptr<const PlanUpdate>& update,
    const std::string& worker_id) {
  std::shared_ptr<const Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& e : entries_) {
      if (e->update == update) entry = e;
    }
    if (entry == nullptr) {
      auto e = std::make_shared<Entry>();
      e->update = update;
      const EpochPlan& p = update->plan;
      v1::PlanUpdate proto;
      ToProtoShared(*update, &proto);  // no slots, no moves
      e->base = grpc::Slice(proto.SerializeAsString());
      // Field 7 (assignments) encoded alone: appended, it parses as one
      // more element of the repeated field.
      for (const Slot& slot : p.slots) {
        v1::PlanUpdate one;
        ToProto(slot, one.add_assignments());
        e->own.emplace(slot.worker_id, grpc::Slice(one.SerializeAsString()));
      }
      e->moves = MovesOfLocked(p);
      entries_.push_back(e);
      if (entries_.size() > 16) entries_.pop_front();
      entry = std::move(e);
    }
  }
  grpc::Slice slices[3] = {entry->base};
  size_t n = 1;
  auto it = entry->own.find(worker_id);
  if (it != entry->own.end()) slices[n++] = it->second;
  auto moves = entry->moves->own.find(worker_id);
  if (moves != entry->moves->own.end()) slices[n++] = moves->second;
  return grpc::ByteBuffer(slices, n);
}

PlanWatchHub::PlanWatchHub(Membership* membership) : membership_(membership) {
  notifier_ = std::thread([this] {
    LowerThisThreadPriority(kBackgroundNice);  // below the heartbeat lane
    NotifyLoop();
  });
}

PlanWatchHub::~PlanWatchHub() {
  membership_->Shutdown();  // ends NotifyLoop if nobody did yet
  notifier_.join();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlanWatchHub::Open(
    const grpc::Status& session, const std::string& worker_id) {
  auto* r = new PlanWatchReactor(this, worker_id);
  if (!session.ok()) {
    r->Reject(session);
  } else {
    r->StartWatching();
    r->StartSendInitialMetadata();  // the client sees the stream is open
    r->Poke();
  }
  return r;
}

void PlanWatchHub::Register(PlanWatchReactor* r) {
  absl::MutexLock lock(&mu_);
  reactors_.insert(r);
}

void PlanWatchHub::Unregister(PlanWatchReactor* r) {
  absl::MutexLock lock(&mu_);
  reactors_.erase(r);
}

void PlanWatchHub::NotifyLoop() {
  int64_t seq = membership_->WaitForUpdates(-1, absl::ZeroDuration()).last_seq;
  while (true) {
    WatchBatch batch = membership_->WaitForUpdates(seq, absl::Seconds(1));
    seq = batch.last_seq;
    if (batch.shutdown) {
      absl::MutexLock lock(&mu_);
      for (PlanWatchReactor* r : reactors_) r->Poke();
      return;
    }
    if (!batch.updates.empty()) PokeAllPaced();
  }
}

void PlanWatchHub::PokeAllPaced() {
  // Resumes after the last reactor poked: the set is ordered, and one that
  // left in the pause is simply not found again; one that opened in it was
  // poked by Open.
  PlanWatchReactor* last = nullptr;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto it =
          last == nullptr ? reactors_.begin() : reactors_.upper_bound(last);
      for (int n = 0; it != reactors_.end() && n < kFanOutChunk; ++it, ++n) {
        (*it)->Poke();
        last = *it;
      }
      if (it == reactors_.end()) return;
    }
    absl::SleepFor(kFanOutPause);
  }
}

PlanWatchReactor::PlanWatchReactor(PlanWatchHub* hub, std::string worker_id)
    : hub_(hub), worker_id_(std::move(worker_id)) {
  hub_->Register(this);
}

void PlanWatchReactor::StartWatching() {
  watching_ = true;
  hub_->membership()->WatchOpened(worker_id_);
}

void PlanWatchReactor::Unregister() {
  hub_->Unregister(this);
  if (watching_) hub_->membership()->WatchClosed(worker_id_);
}

void PlanWatchReactor::FetchLocked() {
  int64_t after = seq_;
  if (UnsentLocked() > 0) {
    // Still writing older steps: send the latest state instead.
    DropUnsentLocked();
    after = -1;
  }
  WatchBatch batch =
      hub_->membership()->WaitForUpdates(after, absl::ZeroDuration());
  if (after >= 0 && batch.updates.size() > 2) {
    batch = hub_->membership()->WaitForUpdates(-1, absl::ZeroDuration());
  }
  if (batch.shutdown) {
    FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "coordinator is shutting down"));
    return;
  }
  for (const auto& u : batch.updates) {
    queue_.push_back(hub_->bytes()->Get(u, worker_id_));  // shares slices
  }
  seq_ = batch.last_seq;
}

}  // namespace zshard::server
