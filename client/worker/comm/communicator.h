// The Communicator: the collectives and point-to-point moves of one group of
// ranks (reduce-scatter, all-gather, all-reduce, send/recv, barrier, abort),
// with its options and the factory that picks a backend (HostCommunicator
// for host memory, over Gloo's TCP pairs or shared memory; NCCL for device
// memory).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/worker/comm/dtype.h"
#include "client/worker/comm/kv_store.h"

namespace zshard::comm {

// Where a communicator's buffers live, which also picks the backend.
enum class CommDevice : uint8_t { kCpu, kCuda };

// How the host backend (HostCommunicator) moves bytes between ranks.
enum class HostTransport : uint8_t { kAuto, kTcp, kShm };

// "auto", "tcp", "shm".
absl::string_view HostTransportName(HostTransport t);

// Parses "auto" | "tcp" | "shm"; InvalidArgument naming the bad value
// otherwise.
absl::StatusOr<HostTransport> ParseHostTransport(absl::string_view name);

// Options of CreateCommunicator. Every rank of a group passes the same
// `size`, `group` and `store` contents and its own `rank`.
struct CommOptions {
  // This rank, in [0, size). Default 0.
  int rank = 0;
  // Ranks in the group, >= 1. Default 1.
  int size = 1;
  // Names the group inside `store`: rendezvous keys live under it, so two
  // groups (e.g. intra- and inter-instance) can share a store. The caller's
  // store adds job and epoch. Default "default".
  std::string group = "default";
  // Rendezvous store shared by the group's ranks; must outlive creation.
  // Required when size > 1. Not owned. Default none.
  KvStore* store = nullptr;
  // Bound on every operation, including creation's rendezvous; an operation
  // that runs longer fails with DeadlineExceeded. Default 30 s.
  int64_t timeout_ms = 30000;
  // kCpu: host buffers, HostCommunicator (over TCP or shared memory:
  // host_transport).
  // kCuda: device buffers, NCCL.
  // Default kCpu.
  CommDevice device = CommDevice::kCpu;
  // CUDA device ordinal used with kCuda. Default 0.
  int cuda_device = 0;
  // kCpu over tcp: the local address this rank listens on. Default loopback.
  std::string hostname = "127.0.0.1";
  // kCpu: bytes per pipelined message of the host algorithms, >= 4096; 0:
  // the transport's default (tcp 1 MiB; shm 256 KiB, which keeps the
  // receive scratch in cache). Default 0.
  size_t chunk_bytes = 0;
  // kCpu: messages in flight per peer in a reduce-scatter (receive scratch
  // is pipeline_depth * chunk_bytes per peer), in [1, 64]; 0: the
  // transport's default (tcp 4, shm 2). Default 0.
  int pipeline_depth = 0;
  // kCpu: reduce-scatter fp32, int64 and uint8 over a ring (3 ranks or
  // more) instead of the pairwise exchange; bf16 and fp16 always take the
  // pairwise exchange, which rounds once. Default false: on loopback the
  // ring's per-hop two-input reductions cost more CPU than its fewer
  // streams save.
  bool gloo_ring = false;
  // kCpu only; every rank of the group passes the same value. kTcp: Gloo's
  // TCP pairs. kShm: shared memory; every rank of the group must run on this
  // host in this pid namespace, else creation fails with FailedPrecondition
  // naming the rank that is elsewhere. kAuto: shm when every rank of the
  // group is on one host (one pid namespace), else tcp; all ranks decide
  // alike. Default kAuto.
  HostTransport host_transport = HostTransport::kAuto;
  // kCpu with kAuto or kShm: replaces this rank's host identity (boot id,
  // pid and ipc namespaces, hostname) in the shared-memory rendezvous, so
  // that tests can place threads on "different hosts". Default empty: the
  // real identity.
  std::string host_identity;
};

// A group of `size` ranks that run collectives together. Every rank must
// issue the same sequence of collectives with the same counts and types.
//
// Thread safety: one operation at a time per communicator (a concurrent one
// fails with FailedPrecondition); Abort() may be called from any thread at
// any time. After an operation fails (peer lost, timeout, abort) the
// communicator is broken: every later operation fails with the same code;
// create a new one (new epoch) to go on.
//
// Buffers: host memory for kCpu, device memory for kCuda. Operations are
// synchronous: buffers may be reused when the call returns.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // sendbuf holds size() blocks of `count` elements; rank k's recvbuf
  // (`count` elements) receives the reduction of every rank's block k.
  // recvbuf may be sendbuf's own block (in place); no other overlap.
  absl::Status ReduceScatter(const void* sendbuf, void* recvbuf, size_t count,
                             DataType dtype, ReduceOp op);

  // Every rank's `count` elements land at block rank*count of every rank's
  // recvbuf (size()*count elements). sendbuf may be recvbuf's own block.
  absl::Status AllGather(const void* sendbuf, void* recvbuf, size_t count,
                         DataType dtype);

  // In place: every rank's buf ends as the reduction over all ranks' bufs.
  absl::Status AllReduce(void* buf, size_t count, DataType dtype, ReduceOp op);

  // Moves `bytes` bytes to / from rank `peer` (!= rank()). Messages between
  // two ranks with the same tag match in order; sizes must agree (the NCCL
  // backend ignores tags and matches all messages in order). Send blocks
  // until the peer has received: order sends and receives so they pair up.
  // Zero-byte messages complete at once without touching the network.
  absl::Status Send(int peer, const void* buf, size_t bytes, uint32_t tag);
  absl::Status Recv(int peer, void* buf, size_t bytes, uint32_t tag);

  // Returns once every rank has entered Barrier().
  absl::Status Barrier();

  // Makes every pending and future operation of this communicator fail
  // promptly with Aborted and drops its connections, so peers' operations
  // fail too. Thread-safe, idempotent, never blocks on the network.
  void Abort();

  // Backend name: "gloo" or "nccl".
  virtual absl::string_view backend() const = 0;

  // How bytes move: "tcp" or "shm" for gloo, "nccl" for nccl.
  virtual absl::string_view transport() const { return backend(); }

 protected:
  Communicator(int rank, int size) : rank_(rank), size_(size) {}

 private:
  virtual absl::Status DoReduceScatter(const void* sendbuf, void* recvbuf,
                                       size_t count, DataType dtype,
                                       ReduceOp op) = 0;
  virtual absl::Status DoAllGather(const void* sendbuf, void* recvbuf,
                                   size_t count, DataType dtype) = 0;
  virtual absl::Status DoAllReduce(void* buf, size_t count, DataType dtype,
                                   ReduceOp op) = 0;
  virtual absl::Status DoSend(int peer, const void* buf, size_t bytes,
                              uint32_t tag) = 0;
  virtual absl::Status DoRecv(int peer, void* buf, size_t bytes,
                              uint32_t tag) = 0;
  virtual absl::Status DoBarrier() = 0;
  virtual void DoAbort() = 0;

  // Runs `op` unless aborted or another operation is in progress.
  template <typename Fn>
  absl::Status Run(const char* name, Fn op);

  const int rank_;
  const int size_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> busy_{false};
};

// Creates this rank's communicator and joins the group's rendezvous,
// blocking until every rank has joined or options.timeout_ms passes
// (DeadlineExceeded). InvalidArgument for bad options; Unimplemented for
// kCuda when the NCCL backend is not built.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const CommOptions& options);

// Checks `options` the way CreateCommunicator does.
absl::Status ValidateCommOptions(const CommOptions& options);

}  // namespace zshard::comm
