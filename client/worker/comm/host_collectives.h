// Collectives written once over a PeerTransport: a pairwise-exchange
// reduce-scatter (each rank receives its block from every peer and reduces
// it in fp32, rounding once; optionally a ring for fp32 and integers), a
// direct-exchange all-gather, an all-reduce made of the two, an all-to-all
// barrier and tagged send/recv. Messages are cut into chunks so that transfers
// and reductions overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/worker/comm/dtype.h"
#include "client/worker/comm/peer_transport.h"

namespace zshard::comm {

// Slots [kCollectiveSlotBase, ...) carry collectives; tagged point-to-point
// messages use their tag as slot.
inline constexpr uint64_t kCollectiveSlotBase = uint64_t{1} << 40;

// The number of chunks of `b` (> 0) bytes or elements that cover `a`.
inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Runs the host algorithms for one rank. Owns the receive scratch (reused
// across calls). Not thread-safe: one collective at a time. `transport`
// must outlive this object.
class HostCollectives {
 public:
  struct Options {
    // Bytes per message; also the pipelining grain. Default 1 MiB.
    size_t chunk_bytes = size_t{1} << 20;
    // Chunks in flight per peer in the reduce-scatter. Default 4.
    int depth = 4;
    // Reduce-scatter (and the first half of all-reduce) of fp32, int64 and
    // uint8 over a ring when there are 3 ranks or more: one stream in and
    // one out per rank. bf16 and fp16 always use the pairwise exchange so
    // that they round once. Default false (see CommOptions::gloo_ring).
    bool ring = false;
  };

  HostCollectives(PeerTransport* transport, const Options& options);

  // Semantics as Communicator's; counts already validated. Each call uses a
  // fresh slot; every rank must make the same calls in the same order.
  absl::Status ReduceScatter(const void* sendbuf, void* recvbuf, size_t count,
                             DataType dtype, ReduceOp op, absl::Time deadline);
  absl::Status AllGather(const void* sendbuf, void* recvbuf, size_t count,
                         DataType dtype, absl::Time deadline);
  absl::Status AllReduce(void* buf, size_t count, DataType dtype, ReduceOp op,
                         absl::Time deadline);
  absl::Status Barrier(absl::Time deadline);
  absl::Status Send(int peer, const void* buf, size_t bytes, uint32_t tag,
                    absl::Time deadline);
  absl::Status Recv(int peer, void* buf, size_t bytes, uint32_t tag,
                    absl::Time deadline);

 private:
  // Element range [offset, offset+len) of block k.
  struct Block {
    size_t offset;
    size_t len;
  };

  // Reduce-scatter of blocks[k] of `src` over every rank into dst (the
  // output of this rank's block, which may be src's own block).
  absl::Status ReduceBlocks(const void* src, void* dst,
                            const std::vector<Block>& blocks, DataType dtype,
                            ReduceOp op, uint64_t slot, absl::Time deadline);
  // The same over a ring; requires UseRing(dtype). In host_ring.cc.
  absl::Status RingReduceBlocks(const void* src, void* dst,
                                const std::vector<Block>& blocks,
                                DataType dtype, ReduceOp op, uint64_t slot,
                                absl::Time deadline);
  // Whether reduce-scatters of `dtype` take the ring.
  bool UseRing(DataType dtype) const;
  // All-gather of this rank's block (read from `own`) into blocks[k] of dst.
  absl::Status GatherBlocks(const void* own, void* dst,
                            const std::vector<Block>& blocks, DataType dtype,
                            uint64_t slot, absl::Time deadline);
  // Grows the per-peer receive scratch to `bytes_per_peer`.
  absl::Status EnsureScratch(size_t bytes_per_peer);

  // Slots slot..slot+3 of a collective; the ring adds its hop in bits 48+.
  uint64_t NextSlot() { return kCollectiveSlotBase + 4 * sequence_++; }

  PeerTransport* const transport_;
  const Options options_;
  const int rank_;
  const int size_;
  uint64_t sequence_ = 0;

  size_t scratch_per_peer_ = 0;
  std::vector<char> scratch_;
  // scratch_regions_[p]: region over peer p's part of scratch_ (null for
  // this rank).
  std::vector<std::unique_ptr<TransferRegion>> scratch_regions_;
  char barrier_send_ = 0;
  std::vector<char> barrier_recv_;
  std::unique_ptr<TransferRegion> barrier_send_region_;
  std::unique_ptr<TransferRegion> barrier_recv_region_;
};

}  // namespace zshard::comm
