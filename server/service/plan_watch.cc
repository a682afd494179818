// Callback-API WatchPlan: notifier thread, reactors, proto cache.
#include "server/service/plan_watch.h"

#include <utility>

#include "absl/time/time.h"
#include "server/service/proto_convert.h"

namespace zshard::server {

std::shared_ptr<const grpc::ByteBuffer> PlanBytesCache::Get(
    const std::shared_ptr<const PlanUpdate>& update) {
  absl::MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (e.update == update) return e.bytes;
  }
  v1::PlanUpdate proto;
  ToProto(*update, &proto);
  grpc::Slice slice(proto.SerializeAsString());
  auto bytes = std::make_shared<const grpc::ByteBuffer>(&slice, 1);
  entries_.push_back(Entry{update, bytes});
  if (entries_.size() > 16) entries_.pop_front();
  return bytes;
}

PlanWatchHub::PlanWatchHub(Membership* membership) : membership_(membership) {
  notifier_ = std::thread([this] { NotifyLoop(); });
}

PlanWatchHub::~PlanWatchHub() {
  membership_->Shutdown();  // ends NotifyLoop if nobody did yet
  notifier_.join();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlanWatchHub::Open(
    const grpc::Status& session) {
  auto* r = new PlanWatchReactor(this);
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

PlanWatchReactor::PlanWatchReactor(PlanWatchHub* hub) : hub_(hub) {
  hub_->Register(this);
}

void PlanWatchReactor::Unregister() { hub_->Unregister(this); }

void PlanWatchReactor::FetchLocked() {
  WatchBatch batch =
      hub_->membership()->WaitForUpdates(seq_, absl::ZeroDuration());
  if (batch.shutdown) {
    FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "coordinator is shutting down"));
    return;
  }
  for (const auto& u : batch.updates) {
    queue_.push_back(*hub_->bytes()->Get(u));  // shares the slices
  }
  seq_ = batch.last_seq;
}

}  // namespace zshard::server
