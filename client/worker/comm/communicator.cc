// The Communicator's argument checks, written once above every backend.
#include "client/worker/comm/communicator.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace zshard::comm {
namespace {

// Bytes of `count` elements times `blocks`, or an error on overflow.
absl::StatusOr<size_t> Bytes(size_t count, size_t blocks, DataType dtype) {
  const size_t esize = DataTypeSize(dtype);
  if (esize == 0) return absl::InvalidArgumentError("invalid data type");
  if (count > std::numeric_limits<size_t>::max() / esize / blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("element count ", count, " overflows the buffer size"));
  }
  return count * blocks * esize;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// Checks a full buffer of `full` bytes against a block of `block` bytes that
// may only overlap it as the block at `own_offset`.
absl::Status CheckInPlace(const char* what, const void* full, size_t full_bytes,
                          const void* block, size_t block_bytes,
                          size_t own_offset) {
  if (!Overlap(full, full_bytes, block, block_bytes)) return absl::OkStatus();
  if (static_cast<const char*>(full) + own_offset == block) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": buffers overlap other than at this rank's own block"));
}

absl::Status CheckBuffer(const char* what, const void* buf, size_t bytes) {
  if (bytes > 0 && buf == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is null"));
  }
  return absl::OkStatus();
}

}  // namespace

template <typename Fn>
absl::Status Communicator::Run(const char* name, Fn op) {
  if (aborted_.load()) {
    return absl::AbortedError(absl::StrCat(name, ": communicator aborted"));
  }
  if (busy_.exchange(true)) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, ": another operation is in progress on this communicator"));
  }
  absl::Status status = op();
  busy_.store(false);
  if (!status.ok() && aborted_.load() && !absl::IsAborted(status)) {
    return absl::AbortedError(
        absl::StrCat(name, ": communicator aborted (", status.message(), ")"));
  }
  return status;
}

absl::Status Communicator::ReduceScatter(const void* sendbuf, void* recvbuf,
                                         size_t count, DataType dtype,
                                         ReduceOp op) {
  if (!IsValidReduceOp(op)) {
    return absl::InvalidArgumentError("reduce-scatter: invalid reduce op");
  }
  auto full = Bytes(count, size_, dtype);
  if (!full.ok()) return full.status();
  const size_t block = *full / size_;
  absl::Status s = CheckBuffer("reduce-scatter sendbuf", sendbuf, *full);
  if (s.ok()) s = CheckBuffer("reduce-scatter recvbuf", recvbuf, block);
  if (s.ok()) {
    s = CheckInPlace("reduce-scatter", sendbuf, *full, recvbuf, block,
                     block * rank_);
  }
  if (!s.ok()) return s;
  return Run("reduce-scatter", [&] {
    return DoReduceScatter(sendbuf, recvbuf, count, dtype, op);
  });
}

absl::Status Communicator::AllGather(const void* sendbuf, void* recvbuf,
                                     size_t count, DataType dtype) {
  auto full = Bytes(count, size_, dtype);
  if (!full.ok()) return full.status();
  const size_t block = *full / size_;
  absl::Status s = CheckBuffer("all-gather sendbuf", sendbuf, block);
  if (s.ok()) s = CheckBuffer("all-gather recvbuf", recvbuf, *full);
  if (s.ok()) {
    s = CheckInPlace("all-gather", recvbuf, *full, sendbuf, block,
                     block * rank_);
  }
  if (!s.ok()) return s;
  return Run("all-gather",
             [&] { return DoAllGather(sendbuf, recvbuf, count, dtype); });
}

absl::Status Communicator::AllReduce(void* buf, size_t count, DataType dtype,
                                     ReduceOp op) {
  if (!IsValidReduceOp(op)) {
    return absl::InvalidArgumentError("all-reduce: invalid reduce op");
  }
  auto bytes = Bytes(count, 1, dtype);
  if (!bytes.ok()) return bytes.status();
  absl::Status s = CheckBuffer("all-reduce buffer", buf, *bytes);
  if (!s.ok()) return s;
  return Run("all-reduce", [&] { return DoAllReduce(buf, count, dtype, op); });
}

absl::Status Communicator::Send(int peer, const void* buf, size_t bytes,
                                uint32_t tag) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "send: peer ", peer, " is not another rank of a group of ", size_));
  }
  absl::Status s = CheckBuffer("send buffer", buf, bytes);
  if (!s.ok()) return s;
  return Run("send", [&] { return DoSend(peer, buf, bytes, tag); });
}

absl::Status Communicator::Recv(int peer, void* buf, size_t bytes,
                                uint32_t tag) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recv: peer ", peer, " is not another rank of a group of ", size_));
  }
  absl::Status s = CheckBuffer("recv buffer", buf, bytes);
  if (!s.ok()) return s;
  return Run("recv", [&] { return DoRecv(peer, buf, bytes, tag); });
}

absl::Status Communicator::Barrier() {
  return Run("barrier", [&] { return DoBarrier(); });
}

absl::string_view HostTransportName(HostTransport t) {
  switch (t) {
    case HostTransport::kAuto:
      return "auto";
    case HostTransport::kTcp:
      return "tcp";
    case HostTransport::kShm:
      return "shm";
  }
  return "invalid";
}

absl::StatusOr<HostTransport> ParseHostTransport(absl::string_view name) {
  for (HostTransport t :
       {HostTransport::kAuto, HostTransport::kTcp, HostTransport::kShm}) {
    if (name == HostTransportName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("host transport '", name, "' is not one of auto, tcp, shm"));
}

void Communicator::Abort() {
  aborted_.store(true);
  DoAbort();
}

absl::Status ValidateCommOptions(const CommOptions& options) {
  if (options.size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator size ", options.size, " is below 1"));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator rank ", options.rank, " is outside [0, ",
                     options.size, ")"));
  }
  if (options.size > 1 && options.store == nullptr) {
    return absl::InvalidArgumentError(
        "communicator of more than one rank needs a rendezvous store");
  }
  if (options.timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator timeout_ms ", options.timeout_ms, " is not positive"));
  }
  if (options.host_identity.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(
        "communicator host_identity contains a newline");
  }
  if (options.group.empty()) {
    return absl::InvalidArgumentError("communicator group name is empty");
  }
  if (options.chunk_bytes != 0 && options.chunk_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator chunk_bytes ", options.chunk_bytes, " is below 4096"));
  }
  if (options.pipeline_depth < 0 || options.pipeline_depth > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator pipeline_depth ", options.pipeline_depth,
                     " is outside [0, 64]"));
  }
  return absl::OkStatus();
}

}  // namespace zshard::comm
