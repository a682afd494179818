// The registered region of ShmTransport, shared by its files
// (shm_transport.cc, shm_progress.cc); not part of the interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/worker/comm/peer_transport.h"
#include "client/worker/comm/shm_transport.h"

namespace zshard::comm {

// A registered range of host memory. Used by one thread at a time, like
// its transport; completions are counted here and consumed by the waits.
class ShmRegion final : public TransferRegion {
 public:
  ShmRegion(ShmTransport* transport, char* base, size_t bytes)
      : transport_(transport), base_(base), bytes_(bytes) {}

  ~ShmRegion() override {
    if (outstanding_ > 0) transport_->Orphaned();
  }

  absl::Status PostSend(int peer, uint64_t slot, size_t offset,
                        size_t bytes) override {
    absl::Status s = CheckRange("send", peer, offset, bytes);
    if (!s.ok()) return s;
    return transport_->PostSend(this, peer, slot, base_ + offset, bytes);
  }
  absl::Status PostRecv(int peer, uint64_t slot, size_t offset,
                        size_t bytes) override {
    absl::Status s = CheckRange("recv", peer, offset, bytes);
    if (!s.ok()) return s;
    return transport_->PostRecv(this, peer, slot, base_ + offset, bytes);
  }
  absl::Status WaitSend(absl::Time deadline) override {
    return transport_->Wait(this, true, deadline);
  }
  absl::Status WaitRecv(absl::Time deadline) override {
    return transport_->Wait(this, false, deadline);
  }

 private:
  friend class ShmTransport;

  absl::Status CheckRange(const char* what, int peer, size_t offset,
                          size_t bytes) const {
    if (peer < 0 || peer >= transport_->size() || peer == transport_->rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm ", what, ": peer ", peer, " is not another rank"));
    }
    if (offset > bytes_ || bytes > bytes_ - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm ", what, ": [", offset, ", +", bytes,
                       ") is outside the region of ", bytes_, " bytes"));
    }
    return absl::OkStatus();
  }

  ShmTransport* const transport_;
  char* const base_;
  const size_t bytes_;
  // Completed operations not yet consumed by a Wait.
  uint64_t sends_done_ = 0;
  uint64_t recvs_done_ = 0;
  // Posted operations not yet completed.
  uint64_t outstanding_ = 0;
};

}  // namespace zshard::comm
