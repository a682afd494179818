// RangeTransfer: sends or receives the optimizer state (master, m, v) of
// one param-space range over a Communicator (the one shared with that
// range's peer), in chunks of bounded size,
// each followed by the FNV-1a 64 of its bytes, which the receiver checks
// before writing the chunk into its buffers. Packing and checking overlap
// the transfer of the neighbouring chunk (two scratch buffers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/engine/engine_buffers.h"
#include "client/worker/reshard/param_space.h"

namespace zshard::reshard {

// Not thread-safe (its scratch buffers). Does not own its pointers.
class RangeTransfer {
 public:
  // Chunks carry chunk_bytes / 12 elements (at least one): both sides
  // must use the same chunk_bytes. `tamper`, when set, sees every packed
  // chunk after its checksum was taken (fault injection), on a thread of
  // its own. `aborted` is checked between chunks.
  RangeTransfer(size_t chunk_bytes,
                std::function<void(absl::Span<char>)> tamper,
                const std::atomic<bool>* aborted);

  // Sends [begin, end) of `from` (held by `slices`) to rank `peer` of
  // `comm`. The communicator's status, or Aborted.
  absl::Status Send(comm::Communicator& comm, int peer, uint32_t tag,
                    const engine::EngineBuffers& from,
                    absl::Span<const Slice> slices, int64_t begin, int64_t end);

  // Receives [begin, end) from rank `peer` of `comm` into `to` (at
  // `slices`). DataLoss naming the chunk's elements on a checksum mismatch;
  // the communicator's status, or Aborted.
  absl::Status Recv(comm::Communicator& comm, int peer, uint32_t tag,
                    engine::EngineBuffers& to, absl::Span<const Slice> slices,
                    int64_t begin, int64_t end);

 private:
  // Payload bytes of a chunk of n elements, checksum excluded.
  static size_t PayloadBytes(int64_t n) { return static_cast<size_t>(n) * 12; }
  absl::Status CheckAborted() const;

  const int64_t chunk_elements_;
  const std::function<void(absl::Span<char>)> tamper_;
  const std::atomic<bool>* const aborted_;
  std::vector<char> scratch_[2];
};

}  // namespace zshard::reshard
