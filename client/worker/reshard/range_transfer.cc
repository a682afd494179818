// RangeTransfer: chunk packing ([master][m][v] floats, then the checksum)
// and the send/recv of every chunk of a range.
#include "client/worker/reshard/range_transfer.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_hash.h"
#include "common/status.h"

namespace zshard::reshard {
namespace {

constexpr size_t kChecksumBytes = sizeof(uint64_t);

uint64_t Checksum(const char* data, size_t bytes) {
  plan::Fnv1a64 hash;
  hash.Bytes(data, bytes);
  return hash.digest();
}

}  // namespace

RangeTransfer::RangeTransfer(size_t chunk_bytes,
                             std::function<void(absl::Span<char>)> tamper,
                             const std::atomic<bool>* aborted)
    : chunk_elements_(
          std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes) / 12)),
      tamper_(std::move(tamper)),
      aborted_(aborted) {}

absl::Status RangeTransfer::CheckAborted() const {
  if (aborted_ != nullptr && aborted_->load()) {
    return absl::AbortedError("state moves: aborted");
  }
  return absl::OkStatus();
}

// Both directions overlap the bytes on the wire with the work on the
// state: the sender packs and hashes chunk k+1 while chunk k is in flight,
// the receiver verifies and unpacks chunk k while chunk k+1 arrives. Two
// scratch buffers alternate; a buffer is reused only after the work on it
// is done.
absl::Status RangeTransfer::Send(comm::Communicator& comm, int peer,
                                 uint32_t tag,
                                 const engine::EngineBuffers& from,
                                 absl::Span<const Slice> slices, int64_t begin,
                                 int64_t end) {
  auto pack = [&](int64_t b, std::vector<char>& buf) -> absl::Status {
    const int64_t n = std::min(end, b + chunk_elements_) - b;
    const size_t payload = PayloadBytes(n);
    buf.resize(payload + kChecksumBytes);
    float* floats = reinterpret_cast<float*>(buf.data());
    ZSHARD_RETURN_IF_ERROR(
        CopyOut(from, slices, b, b + n, floats, floats + n, floats + 2 * n));
    const uint64_t sum = Checksum(buf.data(), payload);
    std::memcpy(buf.data() + payload, &sum, kChecksumBytes);
    if (tamper_) tamper_(absl::MakeSpan(buf.data(), payload));
    return absl::OkStatus();
  };
  if (begin >= end) return absl::OkStatus();
  ZSHARD_RETURN_IF_ERROR(pack(begin, scratch_[0]));
  int current = 0;
  for (int64_t b = begin; b < end; b += chunk_elements_) {
    ZSHARD_RETURN_IF_ERROR(CheckAborted());
    const int64_t next = b + chunk_elements_;
    std::future<absl::Status> packing;
    if (next < end) {
      std::vector<char>* spare = &scratch_[1 - current];
      packing = std::async(std::launch::async,
                           [&pack, next, spare] { return pack(next, *spare); });
    }
    const absl::Status sent = comm.Send(peer, scratch_[current].data(),
                                        scratch_[current].size(), tag);
    const absl::Status packed =
        packing.valid() ? packing.get() : absl::OkStatus();
    ZSHARD_RETURN_IF_ERROR(sent);
    ZSHARD_RETURN_IF_ERROR(packed);
    current = 1 - current;
  }
  return absl::OkStatus();
}

absl::Status RangeTransfer::Recv(comm::Communicator& comm, int peer,
                                 uint32_t tag, engine::EngineBuffers& to,
                                 absl::Span<const Slice> slices, int64_t begin,
                                 int64_t end) {
  // Checks the chunk at `b` held in `buf` and writes it into `to`.
  auto unpack = [&](int64_t b, const std::vector<char>& buf) -> absl::Status {
    const int64_t n = std::min(end, b + chunk_elements_) - b;
    const size_t payload = PayloadBytes(n);
    uint64_t sum = 0;
    std::memcpy(&sum, buf.data() + payload, kChecksumBytes);
    if (sum != Checksum(buf.data(), payload)) {
      return absl::DataLossError(
          absl::StrCat("checksum mismatch in elements [", b, ", ", b + n, ")"));
    }
    const float* floats = reinterpret_cast<const float*>(buf.data());
    return CopyIn(to, slices, b, b + n, floats, floats + n, floats + 2 * n);
  };
  std::future<absl::Status> unpacking;
  auto finish = [&]() -> absl::Status {
    return unpacking.valid() ? unpacking.get() : absl::OkStatus();
  };
  int current = 0;
  for (int64_t b = begin; b < end; b += chunk_elements_) {
    absl::Status status = CheckAborted();
    std::vector<char>& buf = scratch_[current];
    if (status.ok()) {
      const int64_t n = std::min(end, b + chunk_elements_) - b;
      buf.resize(PayloadBytes(n) + kChecksumBytes);
      status = comm.Recv(peer, buf.data(), buf.size(), tag);
    }
    // The previous chunk first: its error is the earlier one.
    const absl::Status previous = finish();
    ZSHARD_RETURN_IF_ERROR(previous);
    ZSHARD_RETURN_IF_ERROR(status);
    unpacking = std::async(std::launch::async,
                           [&unpack, b, &buf] { return unpack(b, buf); });
    current = 1 - current;
  }
  return finish();
}

}  // namespace zshard::reshard
