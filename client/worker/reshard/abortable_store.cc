// AbortableStore: sliced waits with an abort check between slices.
#include "client/worker/reshard/abortable_store.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zshard::reshard {
namespace {

absl::Status AbortedError() {
  return absl::AbortedError("state moves: aborted during the rendezvous");
}

const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace

AbortableStore::AbortableStore(comm::KvStore* inner,
                               const std::atomic<bool>* aborted,
                               int64_t slice_ms)
    : inner_(inner),
      aborted_(aborted),
      slice_ms_(std::max<int64_t>(1, slice_ms)) {}

template <typename Op>
auto AbortableStore::Sliced(int64_t timeout_ms, Op op)
    -> decltype(op(int64_t{0})) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  while (true) {
    if (aborted_->load()) return AbortedError();
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    auto result = op(std::clamp<int64_t>(left, 0, slice_ms_));
    const absl::Status status = StatusOf(result);
    if (status.ok() || !absl::IsDeadlineExceeded(status) || left <= slice_ms_) {
      if (!status.ok() && aborted_->load()) return AbortedError();
      return result;
    }
  }
}

absl::Status AbortableStore::Set(absl::string_view key,
                                 absl::string_view value) {
  if (aborted_->load()) return AbortedError();
  return inner_->Set(key, value);
}

absl::StatusOr<std::string> AbortableStore::Get(absl::string_view key,
                                                int64_t timeout_ms) {
  return Sliced(timeout_ms,
                [&](int64_t slice) { return inner_->Get(key, slice); });
}

absl::Status AbortableStore::Wait(const std::vector<std::string>& keys,
                                  int64_t timeout_ms) {
  return Sliced(timeout_ms,
                [&](int64_t slice) { return inner_->Wait(keys, slice); });
}

bool AbortableStore::cancelled() const { return aborted_->load(); }

}  // namespace zshard::reshard
