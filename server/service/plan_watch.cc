// Callback-API WatchPlan: notifier thread, reactors, proto cache.
#include "server/service/plan_watch.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "server/service/proto_convert.h"

namespace zshard::server {

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
      PlanUpdate bare = *update;  // everything but the slots
      bare.plan.slots.clear();
      const EpochPlan& p = update->plan;
      v1::PlanUpdate proto;
      ToProto(bare, &proto);
      e->base = grpc::Slice(proto.SerializeAsString());
      // Field 7 (assignments) encoded alone: appended, it parses as one
      // more element of the repeated field.
      for (const Slot& slot : p.slots) {
        v1::PlanUpdate one;
        ToProto(slot, one.add_assignments());
        e->own.emplace(slot.worker_id, grpc::Slice(one.SerializeAsString()));
      }
      entries_.push_back(e);
      if (entries_.size() > 16) entries_.pop_front();
      entry = std::move(e);
    }
  }
  auto it = entry->own.find(worker_id);
  if (it == entry->own.end()) return grpc::ByteBuffer(&entry->base, 1);
  grpc::Slice slices[2] = {entry->base, it->second};
  return grpc::ByteBuffer(slices, 2);
}

PlanWatchHub::PlanWatchHub(Membership* membership) : membership_(membership) {
  notifier_ = std::thread([this] { NotifyLoop(); });
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
    if (!batch.updates.empty() || batch.shutdown) {
      absl::MutexLock lock(&mu_);
      for (PlanWatchReactor* r : reactors_) r->Poke();
    }
    if (batch.shutdown) return;
  }
}

PlanWatchReactor::PlanWatchReactor(PlanWatchHub* hub, std::string worker_id)
    : hub_(hub), worker_id_(std::move(worker_id)) {
  hub_->Register(this);
}

void PlanWatchReactor::Unregister() { hub_->Unregister(this); }

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
