// StateMover: executes one epoch's moves of optimizer state (docs/design.md
// section 6) on this worker: copies the ranges it keeps from its old
// buffers into its new ones (device to device), sends the ranges it gives
// away and receives the ranges it gets, in bounded chunks each verified by
// a checksum, and reads the ranges whose source is a checkpoint file. State
// is addressed in param space (plan::Move), so old and new buffers may have
// any world, instance count or bucket size.
//
// A member is given only its own moves (the coordinator sends each watcher
// the moves it sends or receives), each with its index in the epoch's full
// list (plan::Move::index). Every member walks its moves in index order,
// so the moves of the whole epoch form one global sequence that each member
// follows its part of, and each move involves at most two members: the
// smallest unfinished move always has both endpoints ready for it (each
// has finished every smaller move of its own, since all smaller moves are
// finished), so the walk never deadlocks. The index also tags the move's
// messages.
//
// Bytes travel over one 2-member host communicator per peer this member
// exchanges with (PeerLinks: group "<group>/<a>/<b>" of the sorted pair in
// the epoch-scoped store), joined at the first move with that peer and
// closed, after a barrier, right after the last one (a step of the same
// global sequence, so still no deadlock). One communicator over all N
// participants would be a full mesh of N(N-1)/2 connections, and every
// member would need every move to know N; pairwise communicators cost only
// the pairs that actually exchange bytes, which is also what makes large
// re-shards cheap.
//
// On every device the moves travel through host memory over the host
// transport (tcp or shm), the buffers' device copying each chunk out of or
// into its memory (through pinned staging on CUDA), never over NCCL
// send/recv: a move happens once per re-shard, not per step; the FNV-1a
// checksum of every chunk is taken and checked on the host bytes that
// travel; a sender may be a member that holds no rank, or no GPU, in the
// new epoch; checkpoint sources are host files anyway; and a host
// communicator between two members is cheap to make for each epoch and
// aborts promptly, where an NCCL communicator over an ad-hoc set of members
// would cost a full NCCL initialisation per transition.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/kv_store.h"
#include "client/worker/engine/engine_buffers.h"
#include "client/worker/reshard/peer_links.h"
#include "common/plan/moves.h"

namespace zshard::reshard {

struct MoveInput {
  // This worker's id (compared with Move.source_member / dest_member).
  std::string self;
  // This worker's state in the base epoch, or null when it holds none or
  // must not use it (a restore: every range comes from the checkpoint).
  // Read only. Not owned.
  const engine::EngineBuffers* old_state = nullptr;
  // This worker's buffers in the new epoch (made by EngineBuffers::Create
  // for its new rank), or null when it holds no rank in the new epoch (a
  // member that only sends). Its owned windows are filled: master, exp_avg
  // and exp_avg_sq (for fp32 params the master is the param buffer's
  // window). Params outside owned windows are left to the caller's
  // all-gather. Not owned.
  engine::EngineBuffers* new_state = nullptr;
  // Whether what both old_state and new_state own is copied locally (no
  // move names it). False when the two are different models' state: a
  // model-parallel worker whose slot changed, whose old state is only sent.
  bool keep_local = true;
  // This worker's moves: those it sends or receives, each with its index in
  // the epoch's full list (moves naming neither end as this worker are
  // ignored, so the full list works too). Any order: they run in index
  // order. A move between two different members needs an index >= 0,
  // unique among them.
  std::vector<plan::Move> moves;
  // The files that checkpoint sources read, indexed by Move.fragment,
  // relative to checkpoint_dir.
  std::vector<std::string> checkpoint_files;
  // Directory that checkpoint_files are relative to (the update's
  // restore.dir); empty when no move reads a checkpoint.
  std::string checkpoint_dir;
  // Rendezvous store scoped to the new epoch; required when this worker
  // sends or receives a member move. Not owned.
  comm::KvStore* store = nullptr;
  // Prefix of the pair communicators' group names inside `store` (see
  // PeerLinks). Default "moves".
  std::string group = "moves";
  // Bound on the rendezvous and on every send/recv. Default 30 s.
  int64_t timeout_ms = 30000;
  // Local address to listen on. Default loopback.
  std::string hostname = "127.0.0.1";
  // How the members exchange bytes (communicator.h). Default kAuto.
  comm::HostTransport host_transport = comm::HostTransport::kAuto;
  // Payload bytes per message (each followed by its checksum); every
  // member must pass the same value. Default 4 MiB.
  size_t chunk_bytes = size_t{4} << 20;
  // Fault injection in tests: when set, a sender calls it on every packed
  // chunk's payload after taking its checksum (bytes changed on the way).
  // Default none.
  std::function<void(absl::Span<char>)> tamper_chunk;
};

struct MoveStats {
  int64_t bytes_sent = 0;  // state bytes (12 per element), no checksums
  int64_t bytes_received = 0;
  int64_t bytes_kept = 0;  // copied from old_state to new_state
  int64_t bytes_from_checkpoint = 0;
  double seconds = 0;
};

// The payload key of a Run error caused by a live source: its value is the
// source member's id, so the coordinator can plan from another holder.
inline constexpr char kFailedSourcePayload[] = "zshard/failed-source-member";

// The source member named by `status`'s kFailedSourcePayload, or "".
std::string FailedSourceMember(const absl::Status& status);

// The payload key of a Run error on the link to another member whose
// transport named that member (comm::kPeerPayload): its value is the
// member's id, so the worker's report can name the epoch rank of the link's
// other end.
inline constexpr char kFailedLinkPayload[] = "zshard/failed-link-member";

// The member named by `status`'s kFailedLinkPayload, or "".
std::string FailedLinkMember(const absl::Status& status);

// `status` with `context` before its message, payloads kept.
absl::Status WithContext(const absl::Status& status,
                         const std::string& context);

// One use: construct, Run once; Abort from any thread.
class StateMover {
 public:
  explicit StateMover(MoveInput input);
  ~StateMover();
  StateMover(const StateMover&) = delete;
  StateMover& operator=(const StateMover&) = delete;

  // Runs every move this worker takes part in, in index order (see the
  // comment at the top). When old_state and new_state are both set, every
  // element of new_state's owned windows that old_state also owns is copied
  // locally first; then every owned element of new_state must have been kept,
  // received or read (Internal otherwise, naming the first missing range).
  // Errors: DataLoss for a checksum mismatch or a missing, unreadable or
  // damaged checkpoint file (naming the range), the communicator's status
  // (Aborted, DeadlineExceeded, Unavailable) for a peer that fails,
  // InvalidArgument for a move that names a param or range this worker's
  // buffers do not hold, or a member move without an index or with one seen
  // twice.
  absl::StatusOr<MoveStats> Run();

  // Makes a Run in progress (and any later one) fail promptly with
  // Aborted. Thread-safe, idempotent.
  void Abort();

 private:
  // Everything but the timing: keep, walk the moves, check.
  absl::Status RunMoves(MoveStats& stats);

  MoveInput input_;
  std::atomic<bool> aborted_{false};
  // The links to this worker's peers, for Abort.
  PeerLinks links_;
};

}  // namespace zshard::reshard
