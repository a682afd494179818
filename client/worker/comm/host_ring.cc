// The ring reduce-scatter of HostCollectives: n-1 hops, each rank sending
// to its successor and receiving from its predecessor only, so a rank keeps
// one stream in and one out instead of n-1 of each. Partials travel in the
// element type, so it serves only types whose reduction rounds nothing away
// between hops that the pairwise exchange would keep (fp32 accumulates in
// fp32 either way; integers are exact); bf16 and fp16 use the pairwise
// exchange, which rounds once.
#include <algorithm>
#include <cstring>

#include "client/worker/comm/host_collectives.h"
#include "client/worker/comm/numerics.h"
#include "common/status.h"

namespace zshard::comm {

bool HostCollectives::UseRing(DataType dtype) const {
  return options_.ring && size_ >= 3 && dtype != DataType::kBf16 &&
         dtype != DataType::kFp16;
}

// At hop s (0..n-2) rank r sends the partial of block (r-1-s) mod n to r+1
// and receives the partial of block (r-2-s) mod n from r-1, adds its own
// contribution, and forwards it at hop s+1; at the last hop the received
// block is r's own and the sum lands in dst. Hop 0 sends straight from src.
// Each hop has its own slot and a ring of `depth` chunk buffers; chunks are
// processed in (chunk, hop) order on every rank, so each wait depends only
// on work the predecessor has already done (no cycle, no deadlock).
absl::Status HostCollectives::RingReduceBlocks(const void* src, void* dst,
                                               const std::vector<Block>& blocks,
                                               DataType dtype, ReduceOp op,
                                               uint64_t slot,
                                               absl::Time deadline) {
  const size_t esize = DataTypeSize(dtype);
  const size_t chunk = std::max<size_t>(1, options_.chunk_bytes / esize);
  const size_t total = blocks.back().offset + blocks.back().len;
  if (total == 0) return absl::OkStatus();
  const int n = size_;
  const int next = (rank_ + 1) % n;
  const int prev = (rank_ + n - 1) % n;
  const int hops = n - 1;
  // Two buffers at least: a hop's chunk buffer is reused only after the
  // send of the chunk before it has completed.
  const size_t depth = static_cast<size_t>(std::max(2, options_.depth));
  ZSHARD_RETURN_IF_ERROR(EnsureScratch(depth * chunk * esize));
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  ZSHARD_ASSIGN_OR_RETURN(
      auto send_region,
      transport_->Register(const_cast<char*>(in), total * esize));
  auto fail = [&](absl::Status s) {
    transport_->Shutdown();
    return s;
  };
  auto recv_block = [&](int s) { return (rank_ + 2 * n - 2 - s) % n; };
  auto chunks = [&](int block) { return CeilDiv(blocks[block].len, chunk); };
  auto chunk_len = [&](int block, size_t c) {
    return std::min(chunk, blocks[block].len - c * chunk);
  };
  auto hop_slot = [&](int s) {
    return slot | (static_cast<uint64_t>(s) + 1) << 48;
  };
  // Hop s uses the scratch region of rank (rank_ + 1 + s) % n, never ours.
  auto region = [&](int s) {
    return scratch_regions_[(rank_ + 1 + s) % n].get();
  };
  auto buffer = [&](int s, size_t c) {
    return scratch_.data() + ((rank_ + 1 + s) % n) * scratch_per_peer_ +
           (c % depth) * chunk * esize;
  };
  auto post_recv = [&](int s, size_t c) {
    const int b = recv_block(s);
    if (c >= chunks(b)) return absl::OkStatus();
    return region(s)->PostRecv(prev, hop_slot(s), (c % depth) * chunk * esize,
                               chunk_len(b, c) * esize);
  };

  const int first = (rank_ + n - 1) % n;
  size_t raw_sends = 0;
  for (size_t c = 0; c < chunks(first); ++c) {
    absl::Status s = send_region->PostSend(
        next, hop_slot(0), (blocks[first].offset + c * chunk) * esize,
        chunk_len(first, c) * esize);
    if (!s.ok()) return fail(s);
    ++raw_sends;
  }
  for (int s = 0; s < hops; ++s) {
    for (size_t c = 0; c < depth; ++c) {
      absl::Status st = post_recv(s, c);
      if (!st.ok()) return fail(st);
    }
  }
  size_t max_chunks = 0;
  for (int b = 0; b < n; ++b) max_chunks = std::max(max_chunks, chunks(b));
  std::vector<size_t> sent(hops, 0);  // partials forwarded from hop s
  std::vector<size_t> done(hops, 0);  // ... of which completed
  for (size_t c = 0; c < max_chunks; ++c) {
    for (int s = 0; s < hops; ++s) {
      const int b = recv_block(s);
      if (c >= chunks(b)) continue;
      absl::Status st = region(s)->WaitRecv(deadline);
      if (!st.ok()) return fail(st);
      char* partial = buffer(s, c);
      const void* inputs[2] = {partial,
                               in + (blocks[b].offset + c * chunk) * esize};
      const size_t len = chunk_len(b, c);
      if (s == hops - 1) {
        ReduceInto(dtype, op, inputs, 2, out + c * chunk * esize, len);
        st = post_recv(s, c + depth);
      } else {
        ReduceInto(dtype, op, inputs, 2, partial, len);
        st = region(s)->PostSend(next, hop_slot(s + 1),
                                 (c % depth) * chunk * esize, len * esize);
        ++sent[s];
        // The previous chunk's buffer is free once its send completed
        // (sends to one peer on one slot complete in order).
        if (st.ok() && c >= 1) {
          st = region(s)->WaitSend(deadline);
          ++done[s];
          if (st.ok()) st = post_recv(s, c - 1 + depth);
        }
      }
      if (!st.ok()) return fail(st);
    }
  }
  for (int s = 0; s < hops; ++s) {
    for (; done[s] < sent[s]; ++done[s]) {
      absl::Status st = region(s)->WaitSend(deadline);
      if (!st.ok()) return fail(st);
    }
  }
  for (size_t i = 0; i < raw_sends; ++i) {
    absl::Status st = send_region->WaitSend(deadline);
    if (!st.ok()) return fail(st);
  }
  return absl::OkStatus();
}

}  // namespace zshard::comm
