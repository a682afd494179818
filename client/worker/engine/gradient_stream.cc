// GradientStream: readiness of buckets, and the windows kept across a
// producer's restart.
#include "client/worker/engine/gradient_stream.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace zshard::engine {

GradientStream::GradientStream(EngineBuffers* buffers) : buffers_(buffers) {
  const std::vector<WindowState>& windows = buffers_->windows();
  for (size_t w = 0; w < windows.size(); ++w) {
    window_of_[{windows[w].buffer, windows[w].bucket}] = static_cast<int>(w);
  }
  ready_.assign(windows.size(), false);
  reduced_.assign(windows.size(), false);
}

absl::Status GradientStream::MarkReady(int buffer, int bucket) {
  auto it = window_of_.find({buffer, bucket});
  if (it == window_of_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket ", bucket, " of buffer ", buffer, " is not in the plan"));
  }
  absl::MutexLock lock(&mu_);
  ready_[it->second] = true;
  return absl::OkStatus();
}

absl::Status GradientStream::Restart() {
  std::vector<int> done;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* in_flight) { return *in_flight < 0; }, &in_flight_));
    for (size_t w = 0; w < ready_.size(); ++w) {
      if (reduced_[w]) {
        if (kept_.count(static_cast<int>(w)) == 0) {
          done.push_back(static_cast<int>(w));
        }
      } else {
        ready_[w] = false;
      }
    }
    // Finish puts every kept window back; the reducer waits for it.
    restore_pending_ = !kept_.empty() || !done.empty();
  }
  // Nothing touches these windows any more: the reducer has passed them.
  for (int w : done) {
    const WindowState& win = buffers_->windows()[w];
    const BufferState& b = buffers_->buffers()[win.buffer];
    const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
    std::vector<char>& copy = kept_[w];
    copy.resize(static_cast<size_t>(win.size() * gb));
    ZSHARD_RETURN_IF_ERROR(
        buffers_->device().CopyToHost(copy.data(), b.grads.at(win.start * gb),
                                      static_cast<int64_t>(copy.size())));
  }
  return absl::OkStatus();
}

absl::Status GradientStream::Finish() {
  // The reducer is past these windows and waits in WaitRestored before it
  // reads them again, so these copies race with nothing.
  for (const auto& [w, copy] : kept_) {
    const WindowState& win = buffers_->windows()[w];
    const BufferState& b = buffers_->buffers()[win.buffer];
    const int64_t gb = plan::DTypeBytes(b.key.grad_dtype);
    ZSHARD_RETURN_IF_ERROR(
        buffers_->device().CopyToDevice(b.grads.at(win.start * gb), copy.data(),
                                        static_cast<int64_t>(copy.size())));
  }
  kept_.clear();
  absl::MutexLock lock(&mu_);
  ready_.assign(ready_.size(), true);
  restore_pending_ = false;
  return absl::OkStatus();
}

void GradientStream::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

void GradientStream::Discard() {
  absl::MutexLock lock(&mu_);
  discarded_ = true;
}

bool GradientStream::discarded() const {
  absl::MutexLock lock(&mu_);
  return discarded_;
}

int GradientStream::reduced_windows() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (bool r : reduced_) n += r ? 1 : 0;
  return n;
}

absl::Status GradientStream::WaitReady(int w) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, w]() { return cancelled_ || ready_[w]; };
  mu_.Await(absl::Condition(&ready));
  if (cancelled_) {
    return absl::CancelledError("the step's gradients were abandoned");
  }
  in_flight_ = w;
  return absl::OkStatus();
}

absl::Status GradientStream::WaitRestored() {
  absl::MutexLock lock(&mu_);
  auto restored = [this]() { return cancelled_ || !restore_pending_; };
  mu_.Await(absl::Condition(&restored));
  if (cancelled_) {
    return absl::CancelledError("the step's gradients were abandoned");
  }
  return absl::OkStatus();
}

void GradientStream::Done(int w, bool reduced) {
  absl::MutexLock lock(&mu_);
  if (reduced) reduced_[w] = true;
  if (in_flight_ == w) in_flight_ = -1;
}

}  // namespace zshard::engine
