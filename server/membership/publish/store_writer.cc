// StoreWriter: a queue, a leader that drains it, and waiters.
#include "server/membership/publish/store_writer.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace zshard::server {
namespace {

template <typename T>
void Append(std::vector<T>& into, std::vector<T>& from) {
  into.insert(into.end(), std::make_move_iterator(from.begin()),
              std::make_move_iterator(from.end()));
}

}  // namespace

void StoreWriter::Merge(StoreWrite& into, StoreWrite later) {
  Append(into.members, later.members);
  Append(into.deleted_members, later.deleted_members);
  Append(into.epochs, later.epochs);
  for (auto& [key, value] : later.meta) into.meta[key] = value;
  Append(into.events, later.events);
  Append(into.checkpoints, later.checkpoints);
}

int64_t StoreWriter::Enqueue(StoreWrite write) {
  if (store_ == nullptr || write.empty()) return 0;
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(write));
  ++stats_.changes;
  return ++queued_;
}

void StoreWriter::WaitApplied(int64_t ticket) {
  if (ticket <= 0) return;
  absl::MutexLock lock(&mu_);
  while (applied_ < ticket) {
    if (writing_) {
      auto done = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return applied_ >= ticket || !writing_;
      };
      mu_.Await(absl::Condition(&done));
      continue;
    }
    WriteQueuedLocked();
  }
}

void StoreWriter::Retry() {
  if (store_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (!writing_ && durable_ < queued_) WriteQueuedLocked();
}

void StoreWriter::WriteQueuedLocked() {
  // Lead: write everything queued so far in one transaction.
  writing_ = true;
  StoreWrite batch;
  while (!queue_.empty()) {
    Merge(batch, std::move(queue_.front()));
    queue_.pop_front();
  }
  const int64_t upto = queued_;
  mu_.Unlock();
  const absl::Time start = absl::Now();
  absl::Status s = store_->Apply(batch);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!s.ok()) {
    ZSHARD_LOG_ERROR(
        absl::StrCat("state store write failed (kept for the "
                     "next try): ",
                     s.message()));
  } else if (on_durable_) {
    on_durable_(upto);
  }
  mu_.Lock();
  ++stats_.transactions;
  stats_.seconds += seconds;
  if (s.ok()) {
    durable_ = upto;
  } else {
    ++stats_.failures;
    // Ahead of anything queued meanwhile: the order of changes holds.
    queue_.push_front(std::move(batch));
  }
  applied_ = upto;
  writing_ = false;
}

StoreWriter::Stats StoreWriter::stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace zshard::server
