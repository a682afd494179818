// The host collectives over PeerTransport.
#include "client/worker/comm/host_collectives.h"

#include <algorithm>
#include <cstring>

#include "client/worker/comm/numerics.h"
#include "common/status.h"

namespace zshard::comm {

HostCollectives::HostCollectives(PeerTransport* transport,
                                 const Options& options)
    : transport_(transport),
      options_(options),
      rank_(transport->rank()),
      size_(transport->size()) {}

absl::Status HostCollectives::EnsureScratch(size_t bytes_per_peer) {
  if (bytes_per_peer <= scratch_per_peer_) return absl::OkStatus();
  scratch_regions_.clear();
  scratch_.assign(bytes_per_peer * size_, 0);
  scratch_per_peer_ = bytes_per_peer;
  scratch_regions_.resize(size_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    ZSHARD_ASSIGN_OR_RETURN(
        scratch_regions_[p],
        transport_->Register(scratch_.data() + p * bytes_per_peer,
                             bytes_per_peer));
  }
  return absl::OkStatus();
}

absl::Status HostCollectives::ReduceBlocks(const void* src, void* dst,
                                           const std::vector<Block>& blocks,
                                           DataType dtype, ReduceOp op,
                                           uint64_t slot, absl::Time deadline) {
  const size_t esize = DataTypeSize(dtype);
  const size_t chunk = std::max<size_t>(1, options_.chunk_bytes / esize);
  const size_t total = blocks.back().offset + blocks.back().len;
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  const Block& mine = blocks[rank_];
  if (size_ == 1) {
    if (in != out) std::memmove(out, in, total * esize);
    return absl::OkStatus();
  }
  if (total == 0) return absl::OkStatus();
  const size_t depth = static_cast<size_t>(std::max(1, options_.depth));
  ZSHARD_RETURN_IF_ERROR(EnsureScratch(depth * chunk * esize));
  ZSHARD_ASSIGN_OR_RETURN(
      auto send_region,
      transport_->Register(const_cast<char*>(in), total * esize));
  auto fail = [&](absl::Status s) {
    transport_->Shutdown();
    return s;
  };
  auto chunk_len = [&](const Block& b, size_t c) {
    return std::min(chunk, b.len - c * chunk);
  };

  // Every send is posted up front; data flows as peers post receives.
  size_t max_chunks = 0;
  for (const Block& b : blocks)
    max_chunks = std::max(max_chunks, CeilDiv(b.len, chunk));
  size_t sends = 0;
  for (size_t c = 0; c < max_chunks; ++c) {
    for (int i = 1; i < size_; ++i) {
      const int p = (rank_ + i) % size_;
      if (c * chunk >= blocks[p].len) continue;
      absl::Status s =
          send_region->PostSend(p, slot, (blocks[p].offset + c * chunk) * esize,
                                chunk_len(blocks[p], c) * esize);
      if (!s.ok()) return fail(s);
      ++sends;
    }
  }

  const size_t my_chunks = CeilDiv(mine.len, chunk);
  auto post_recvs = [&](size_t c) {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      absl::Status s = scratch_regions_[p]->PostRecv(
          p, slot, (c % depth) * chunk * esize, chunk_len(mine, c) * esize);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  for (size_t c = 0; c < std::min(depth, my_chunks); ++c) {
    absl::Status s = post_recvs(c);
    if (!s.ok()) return fail(s);
  }
  std::vector<const void*> inputs(size_);
  for (size_t c = 0; c < my_chunks; ++c) {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) {
        inputs[p] = in + (mine.offset + c * chunk) * esize;
        continue;
      }
      absl::Status s = scratch_regions_[p]->WaitRecv(deadline);
      if (!s.ok()) return fail(s);
      inputs[p] =
          scratch_.data() + p * scratch_per_peer_ + (c % depth) * chunk * esize;
    }
    // Summing in rank order makes the result independent of arrival order.
    ReduceInto(dtype, op, inputs.data(), size_, out + c * chunk * esize,
               chunk_len(mine, c));
    if (c + depth < my_chunks) {
      absl::Status s = post_recvs(c + depth);
      if (!s.ok()) return fail(s);
    }
  }
  for (size_t i = 0; i < sends; ++i) {
    absl::Status s = send_region->WaitSend(deadline);
    if (!s.ok()) return fail(s);
  }
  return absl::OkStatus();
}

absl::Status HostCollectives::GatherBlocks(const void* own, void* dst,
                                           const std::vector<Block>& blocks,
                                           DataType dtype, uint64_t slot,
                                           absl::Time deadline) {
  const size_t esize = DataTypeSize(dtype);
  const size_t chunk = std::max<size_t>(1, options_.chunk_bytes / esize);
  const size_t total = blocks.back().offset + blocks.back().len;
  const Block& mine = blocks[rank_];
  char* out = static_cast<char*>(dst);
  const char* own_bytes = static_cast<const char*>(own);
  char* own_dst = out + mine.offset * esize;
  if (size_ == 1 || total == 0) {
    if (own_dst != own_bytes)
      std::memmove(own_dst, own_bytes, mine.len * esize);
    return absl::OkStatus();
  }
  ZSHARD_ASSIGN_OR_RETURN(auto recv_region,
                          transport_->Register(out, total * esize));
  std::unique_ptr<TransferRegion> send_region;
  if (mine.len > 0) {
    ZSHARD_ASSIGN_OR_RETURN(
        send_region,
        transport_->Register(const_cast<char*>(own_bytes), mine.len * esize));
  }
  auto fail = [&](absl::Status s) {
    transport_->Shutdown();
    return s;
  };
  size_t max_chunks = 0;
  for (const Block& b : blocks)
    max_chunks = std::max(max_chunks, CeilDiv(b.len, chunk));
  size_t recvs = 0;
  size_t sends = 0;
  for (size_t c = 0; c < max_chunks; ++c) {
    for (int i = 1; i < size_; ++i) {
      const int from = (rank_ + size_ - i) % size_;
      if (c * chunk < blocks[from].len) {
        const size_t len = std::min(chunk, blocks[from].len - c * chunk);
        absl::Status s = recv_region->PostRecv(
            from, slot, (blocks[from].offset + c * chunk) * esize, len * esize);
        if (!s.ok()) return fail(s);
        ++recvs;
      }
      const int to = (rank_ + i) % size_;
      if (c * chunk < mine.len) {
        const size_t len = std::min(chunk, mine.len - c * chunk);
        absl::Status s =
            send_region->PostSend(to, slot, c * chunk * esize, len * esize);
        if (!s.ok()) return fail(s);
        ++sends;
      }
    }
  }
  if (own_dst != own_bytes) std::memmove(own_dst, own_bytes, mine.len * esize);
  for (size_t i = 0; i < recvs; ++i) {
    absl::Status s = recv_region->WaitRecv(deadline);
    if (!s.ok()) return fail(s);
  }
  for (size_t i = 0; i < sends; ++i) {
    absl::Status s = send_region->WaitSend(deadline);
    if (!s.ok()) return fail(s);
  }
  return absl::OkStatus();
}

absl::Status HostCollectives::ReduceScatter(const void* sendbuf, void* recvbuf,
                                            size_t count, DataType dtype,
                                            ReduceOp op, absl::Time deadline) {
  const uint64_t slot = NextSlot();
  std::vector<Block> blocks(size_);
  for (int k = 0; k < size_; ++k) blocks[k] = {k * count, count};
  if (UseRing(dtype)) {
    return RingReduceBlocks(sendbuf, recvbuf, blocks, dtype, op, slot,
                            deadline);
  }
  return ReduceBlocks(sendbuf, recvbuf, blocks, dtype, op, slot, deadline);
}

absl::Status HostCollectives::AllGather(const void* sendbuf, void* recvbuf,
                                        size_t count, DataType dtype,
                                        absl::Time deadline) {
  const uint64_t slot = NextSlot();
  std::vector<Block> blocks(size_);
  for (int k = 0; k < size_; ++k) blocks[k] = {k * count, count};
  return GatherBlocks(sendbuf, recvbuf, blocks, dtype, slot, deadline);
}

absl::Status HostCollectives::AllReduce(void* buf, size_t count, DataType dtype,
                                        ReduceOp op, absl::Time deadline) {
  const uint64_t slot = NextSlot();
  // Blocks differ by at most one element; one rounding happens in the
  // reduce-scatter, the all-gather only copies.
  std::vector<Block> blocks(size_);
  size_t offset = 0;
  for (int k = 0; k < size_; ++k) {
    const size_t len = count / size_ + (static_cast<size_t>(k) < count % size_);
    blocks[k] = {offset, len};
    offset += len;
  }
  char* own =
      static_cast<char*>(buf) + blocks[rank_].offset * DataTypeSize(dtype);
  ZSHARD_RETURN_IF_ERROR(
      UseRing(dtype)
          ? RingReduceBlocks(buf, own, blocks, dtype, op, slot, deadline)
          : ReduceBlocks(buf, own, blocks, dtype, op, slot, deadline));
  return GatherBlocks(own, buf, blocks, dtype, slot + 1, deadline);
}

absl::Status HostCollectives::Barrier(absl::Time deadline) {
  const uint64_t slot = NextSlot();
  if (size_ == 1) return absl::OkStatus();
  if (barrier_send_region_ == nullptr) {
    barrier_recv_.assign(size_, 0);
    ZSHARD_ASSIGN_OR_RETURN(barrier_send_region_,
                            transport_->Register(&barrier_send_, 1));
    ZSHARD_ASSIGN_OR_RETURN(
        barrier_recv_region_,
        transport_->Register(barrier_recv_.data(), barrier_recv_.size()));
  }
  auto fail = [&](absl::Status s) {
    transport_->Shutdown();
    return s;
  };
  for (int i = 1; i < size_; ++i) {
    const int from = (rank_ + size_ - i) % size_;
    absl::Status s = barrier_recv_region_->PostRecv(from, slot, from, 1);
    if (s.ok())
      s = barrier_send_region_->PostSend((rank_ + i) % size_, slot, 0, 1);
    if (!s.ok()) return fail(s);
  }
  for (int i = 1; i < size_; ++i) {
    absl::Status s = barrier_recv_region_->WaitRecv(deadline);
    if (s.ok()) s = barrier_send_region_->WaitSend(deadline);
    if (!s.ok()) return fail(s);
  }
  return absl::OkStatus();
}

absl::Status HostCollectives::Send(int peer, const void* buf, size_t bytes,
                                   uint32_t tag, absl::Time deadline) {
  if (bytes == 0) return absl::OkStatus();
  ZSHARD_ASSIGN_OR_RETURN(auto region,
                          transport_->Register(const_cast<void*>(buf), bytes));
  absl::Status s = region->PostSend(peer, tag, 0, bytes);
  if (s.ok()) s = region->WaitSend(deadline);
  if (!s.ok()) transport_->Shutdown();
  return s;
}

absl::Status HostCollectives::Recv(int peer, void* buf, size_t bytes,
                                   uint32_t tag, absl::Time deadline) {
  if (bytes == 0) return absl::OkStatus();
  ZSHARD_ASSIGN_OR_RETURN(auto region, transport_->Register(buf, bytes));
  absl::Status s = region->PostRecv(peer, tag, 0, bytes);
  if (s.ok()) s = region->WaitRecv(deadline);
  if (!s.ok()) transport_->Shutdown();
  return s;
}

}  // namespace zshard::comm
